// Telemetry records: what a trainer (the TypeScript emulation or a native bridge) publishes, what a
// run log stores one per line (NDJSON), and what the extension draws. Every record names its run.
import { runConfigSchema, GEMM_KINDS, PRECISIONS, type GemmKind, type Precision, type RunConfig } from './config.js';
import { arrayOf, bool, fastPath, intIn, isoDateTime, literal, nonNegInt, nullable, num, numIn, object, optional, refined, str, union, ValidationError, type Schema } from './validate.js';

export const OPERANDS = ['x', 'w', 'dy'] as const;
/** `x`: the layer input (activations), `w`: the weight, `dy`: the gradient of the layer output. */
export type Operand = (typeof OPERANDS)[number];

/** The two operands of each GEMM, in the order `LayerStatsRecord.operands` lists them. */
export const GEMM_OPERANDS: Record<GemmKind, readonly [Operand, Operand]> = {
  fprop: ['x', 'w'],
  dgrad: ['dy', 'w'],
  wgrad: ['dy', 'x'],
};

/**
 * How a GEMM honours its Hadamard rotation given its reduction dimension (protocol 1.1, optional):
 * `none` (rotation none), `rotated` (the block divides `dim`), `padded` (both operands were
 * zero-padded from `dim` to `paddedTo`, a multiple of the block, which keeps the exact product),
 * `skipped` (the block does not divide `dim` and the publisher runs this GEMM unrotated).
 * Wgrad reduces over the tokens of a micro-batch, known per step: it has no `dim`.
 */
export const ROTATION_FIT_STATUSES = ['none', 'rotated', 'padded', 'skipped'] as const;
export type RotationFitStatus = (typeof ROTATION_FIT_STATUSES)[number];
export interface GemmRotationFit {
  status: RotationFitStatus;
  dim?: number;
  paddedTo?: number;
}

export interface LayerInfo {
  /** Unique within the run, e.g. "blocks.3.attn.q" or "lm_head". */
  name: string;
  /** Free-form role: q, k, v, o, gate, up, down, lm_head, or a publisher's own. */
  kind: string;
  /** Transformer block index; -1 for layers outside the blocks (lm_head). */
  block: number;
  outFeatures: number;
  inFeatures: number;
  /**
   * Flat row-major indices into the [outFeatures, inFeatures] weight at which the Wgrad error E is
   * sampled every stats step. Fixed for the run, so sketches at different steps are comparable.
   * With RunConfig.wgradErrorRowStride = N > 1 they all lie in the sampled rows (row ≡ 0 mod N).
   * Absent from every layer (protocol 1.7) where listing them would take the runStarted record past
   * the 16 MiB frame a client reads (20,000-27,000 layers at the default sketch of 64): the sketches then
   * follow positions the publisher still knows but does not list (the Python bridge's rule:
   * docs/protocol.md, section 6.2).
   */
  sketchIndices?: number[];
  /** Per GEMM: how its rotation fits this layer's reduction dimension, decided when the run started. */
  rotationFit?: Record<GemmKind, GemmRotationFit>;
}

export interface RunStartedRecord {
  type: 'runStarted';
  runId: string;
  /** Human label, e.g. "tiny · wgrad mxfp4 · H16". */
  name: string;
  /** ISO-8601 time. */
  startedAt: string;
  trainer: { name: string; version: string };
  config: RunConfig;
  layers: LayerInfo[];
  /** Present when the run restarted from a checkpoint. */
  resumedFrom?: { path: string; step: number };
  /**
   * Absolute path of the run-log directory on the trainer's machine, when the trainer writes one.
   * A host that can read it (same machine, or over Remote-SSH) reopens the run after a window reload.
   */
  logDir?: string;
}

export interface StepRecord {
  type: 'step';
  runId: string;
  step: number;
  tokens: number;
  /** null when the loss was NaN or ±Inf (JSON cannot carry those). */
  loss: number | null;
  lr: number;
  /** Global gradient norm before clipping; null when non-finite. */
  gradNorm: number | null;
  stepMs: number;
  /**
   * Optional (protocol 1.1): this step looked suspicious (e.g. a loss spike), so layer stats now
   * come at every step through `until` instead of every statsEvery steps. Views that assume the
   * configured cadence should expect the extra stats steps.
   */
  denseStats?: { until: number; reason: string };
}

export const SCALE_KINDS = ['e8m0', 'e4m3'] as const;
/** The code a block scale is stored as: E8M0 (MX formats) or E4M3 (NVFP4's block scale). */
export type ScaleKind = (typeof SCALE_KINDS)[number];

/**
 * Exact histogram of the block-scale codes actually stored: no rebinning.
 * `e8m0` (the default when `kind` is absent): bin i counts blocks whose unbiased shared exponent is
 * minExp + i (range −127..127). `e4m3`: bin i counts blocks whose E4M3 scale code is minExp + i,
 * codes 0..126 (sign 0; the value is decodeFp8(code, 'e4m3'), 0 to 448), so `minExp` there is a code.
 */
export interface ScaleHistogram {
  kind?: ScaleKind;
  /** Unbiased exponent (e8m0) or E4M3 code (e4m3) of counts[0]. */
  minExp: number;
  counts: number[];
  /** Blocks with the NaN scale (E8M0 0xFF, E4M3 0x7F): the block held NaN or ±Inf. */
  nanBlocks: number;
}

/** The scale a histogram bin stands for: 2^bin for E8M0, the E4M3 value of code `bin` (0…448) for E4M3. */
export function scaleValueOf(kind: ScaleKind | undefined, bin: number): number {
  if (kind !== 'e4m3') return 2 ** bin;
  const field = (bin >> 3) & 0xf;
  const mantissa = bin & 7;
  return field === 0 ? mantissa * 2 ** -9 : (1 + mantissa / 8) * 2 ** (field - 7);
}

/** Axis label of a bin in the scale's own units: "2^e" exponents for E8M0, the E4M3 value for NVFP4. */
export function scaleBinLabel(kind: ScaleKind | undefined, bin: number): string {
  if (kind !== 'e4m3') return String(bin);
  const value = scaleValueOf(kind, bin);
  return value >= 1 ? String(value) : value.toPrecision(3);
}

export const STATS_FORMATS = ['mxfp4', 'nvfp4', 'mxfp8-e4m3', 'mxfp8-e5m2'] as const;
/** The block format an operand's stats measure. */
export type StatsFormat = (typeof STATS_FORMATS)[number];

/**
 * How one operand of one GEMM quantizes to a block format (with that GEMM's rotation), blocks along
 * the reduction dim: the GEMM's own format when it runs in one, otherwise MXFP4.
 */
export interface OperandStats {
  operand: Operand;
  /** Absent means `mxfp4` (protocol 1.0). Must agree with histogram.kind and blockSize. */
  format?: StatsFormat;
  /** Elements per stored scale: 32 (MX), 16 (NVFP4 1×16) or 256 (NVFP4 16×16 weight tiles); absent means 32. */
  blockSize?: number;
  /** Number of scale blocks; equals sum(histogram.counts) + histogram.nanBlocks. */
  blocks: number;
  elements: number;
  histogram: ScaleHistogram;
  /** Fraction of elements clamped to the element format's largest value (±6 for E2M1) because they rounded past it. */
  saturatedFrac: number;
  /** Fraction of non-zero inputs that quantized to zero. */
  flushedFrac: number;
  /** 10·log10(‖x‖² / ‖x − q(x)‖²); null when the operand is all zero or non-finite. */
  sqnrDb: number | null;
  /**
   * true (protocol 1.1, optional): these stats come from the operand the trainer's own MXFP4 kernel
   * produced (its E8M0 scales and FP4 codes), not from the publisher's re-quantization.
   */
  kernel?: boolean;
}

/**
 * The Wgrad error E = ∇Ŵ − ∇W, where ∇Ŵ is the weight gradient computed at the GEMM's configured
 * precision and ∇W the exact fp32 product. Ratios are null where a norm is zero. With the opt-in
 * RunConfig.wgradErrorRowStride = N > 1 every field comes from every N-th row of ∇W only, the norms
 * scaled to estimate the whole tensor's (see there).
 */
export interface WgradError {
  gradNorm: number;
  errNorm: number;
  /** ‖E‖ / ‖∇W‖ */
  relErr: number | null;
  /** cos(E, ∇W) */
  cosErrGrad: number | null;
  /** ⟨∇Ŵ, ∇W⟩ / ⟨∇W, ∇W⟩ */
  alignment: number | null;
  /** ‖∇W‖ / ‖E‖ (an alert fires when it falls below √3) */
  gradToErr: number | null;
  /** cos(E_t, E_{t−1}) over the full tensor, from the step just before this one; null if not available. */
  lag1Cos: number | null;
  /** E_t at LayerInfo.sketchIndices. */
  sketch: number[];
  /** E_{t−1} at the same indices, so clients can compute lag 1 from sketches too; null if not available. */
  sketchPrev: number[] | null;
}

export interface LayerStatsRecord {
  type: 'layerStats';
  runId: string;
  step: number;
  layer: string;
  gemm: GemmKind;
  /** The precision this GEMM actually ran at (stats describe MXFP4 quantization regardless). */
  precision: Precision;
  /** The GEMM's two operands in GEMM_OPERANDS order. */
  operands: OperandStats[];
  /** Only on `wgrad` records. */
  wgradError?: WgradError;
  /**
   * true (protocol 1.1, optional): the GEMM ran at `precision` and was only observed; the operand
   * stats (except `kernel` ones) and `wgradError` are what this GEMM's configured block format (MXFP4
   * when its configured precision is not one) with its configured rotation and rounding would do to
   * these operands, simulated by the publisher.
   */
  simulated?: boolean;
}

export interface ValidationRecord {
  type: 'validation';
  runId: string;
  step: number;
  tokens: number;
  loss: number | null;
}

export const RUN_END_STATUSES = ['completed', 'diverged', 'stopped', 'failed'] as const;
export type RunEndStatus = (typeof RUN_END_STATUSES)[number];

/**
 * A run's status as a receiver (run store, Runs view, dashboard) knows it: live, ended, or
 * `unknown`: records arrived for a run whose runStarted was never seen (e.g. a replay gap).
 * `interrupted`: the run started but ended without runEnded (its trainer was killed, e.g. `kill -9`,
 * or its run log stops short): shown as "ended without runEnded", not as `stopped`, which a trainer reports.
 */
export const RUN_STATUSES = ['running', 'unknown', 'interrupted', ...RUN_END_STATUSES] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface RunEndedRecord {
  type: 'runEnded';
  runId: string;
  /** The last step executed, −1 when none was (for `diverged`: the step whose loss diverged, ≥ 0). */
  step: number;
  status: RunEndStatus;
  reason: string;
  endedAt: string;
}

export interface CheckpointSavedRecord {
  type: 'checkpointSaved';
  runId: string;
  step: number;
  /** Path of the .safetensors file on the trainer's machine. */
  path: string;
  /** Optional (protocol 1.1): why it was written when not on request or schedule, e.g. "before the suspicious update at step 24". */
  reason?: string;
}

export type TelemetryRecord = RunStartedRecord | StepRecord | LayerStatsRecord | ValidationRecord | RunEndedRecord | CheckpointSavedRecord;
export type TelemetryType = TelemetryRecord['type'];
export const TELEMETRY_TYPES: readonly TelemetryType[] = ['runStarted', 'step', 'layerStats', 'validation', 'runEnded', 'checkpointSaved'];

// Limits keep one record bounded; a publisher over them is told which field to shrink.
export const LIMITS = { layers: 100_000, sketch: 4096, histogramBins: 256, name: 512 } as const;
/** E8M0 shared-scale exponents (unbiased) are −127…127; a histogram bin past either end is invalid. */
export const MAX_SCALE_EXP = 127;
/** The largest E4M3 code of a positive scale (0x7F is NaN). */
export const MAX_E4M3_SCALE_CODE = 126;

const runId = str(256);
const lossValue = nullable(num);
const ratio = nullable(num);

function gemmRotationFitSchema(): Schema<GemmRotationFit> {
  return object<GemmRotationFit>({ status: literal(...ROTATION_FIT_STATUSES), dim: optional(intIn(1, 1 << 30)), paddedTo: optional(intIn(1, 1 << 30)) });
}

export const layerInfoSchema = object<LayerInfo>({
  name: str(LIMITS.name),
  kind: str(64),
  block: intIn(-1, 1_000_000),
  outFeatures: intIn(1, 1 << 30),
  inFeatures: intIn(1, 1 << 30),
  sketchIndices: optional(arrayOf(nonNegInt, LIMITS.sketch)),
  rotationFit: optional(object<Record<GemmKind, GemmRotationFit>>({ fprop: gemmRotationFitSchema(), dgrad: gemmRotationFitSchema(), wgrad: gemmRotationFitSchema() })),
});

const histogramFields = object<ScaleHistogram>({
  kind: optional(literal(...SCALE_KINDS)),
  minExp: intIn(-127, 127),
  counts: arrayOf(nonNegInt, LIMITS.histogramBins),
  nanBlocks: nonNegInt,
});

/** E4M3 bins must be scale codes 0..126 (E8M0 exponents are range-checked with the record: layerStats.exponent-range). */
export const histogramSchema: Schema<ScaleHistogram> = (v, p) => {
  const histogram = histogramFields(v, p);
  if (histogram.kind !== 'e4m3') return histogram;
  if (histogram.minExp < 0) throw new ValidationError(`${p}.minExp`, 'an e4m3 scale code in [0, 126]', histogram.minExp);
  if (histogram.minExp + histogram.counts.length - 1 > MAX_E4M3_SCALE_CODE) {
    throw new ValidationError(`${p}.counts`, `at most ${MAX_E4M3_SCALE_CODE - histogram.minExp + 1} bins from minExp ${histogram.minExp} (e4m3 scale codes end at ${MAX_E4M3_SCALE_CODE})`, histogram.counts);
  }
  return histogram;
};

const operandStatsFields = object<OperandStats>({
  operand: literal(...OPERANDS),
  format: optional(literal(...STATS_FORMATS)),
  blockSize: optional(literal(16, 32, 256)),
  blocks: nonNegInt,
  elements: nonNegInt,
  histogram: histogramSchema,
  saturatedFrac: numIn(0, 1),
  flushedFrac: numIn(0, 1),
  sqnrDb: ratio,
  kernel: optional(bool),
});

/** The scale kind and block size each stats format declares (docs/protocol.md). */
const FORMAT_SHAPES: Record<StatsFormat, { kind: ScaleKind; blockSizes: readonly number[] }> = {
  mxfp4: { kind: 'e8m0', blockSizes: [32] },
  'mxfp8-e4m3': { kind: 'e8m0', blockSizes: [32] },
  'mxfp8-e5m2': { kind: 'e8m0', blockSizes: [32] },
  nvfp4: { kind: 'e4m3', blockSizes: [16, 256] },
};

const operandStatsSchema: Schema<OperandStats> = (v, p) => {
  const stats = operandStatsFields(v, p);
  const format = stats.format ?? 'mxfp4';
  const shape = FORMAT_SHAPES[format];
  const kind = stats.histogram.kind ?? 'e8m0';
  if (kind !== shape.kind) throw new ValidationError(`${p}.histogram.kind`, `'${shape.kind}' for format ${format}`, kind);
  const blockSize = stats.blockSize ?? 32;
  if (!shape.blockSizes.includes(blockSize)) throw new ValidationError(`${p}.blockSize`, `${shape.blockSizes.join(' or ')} for format ${format}`, blockSize);
  return stats;
};

const wgradErrorSchema = object<WgradError>({
  gradNorm: numIn(0, Number.MAX_VALUE),
  errNorm: numIn(0, Number.MAX_VALUE),
  relErr: ratio,
  cosErrGrad: ratio,
  alignment: ratio,
  gradToErr: ratio,
  lag1Cos: ratio,
  sketch: arrayOf(num, LIMITS.sketch),
  sketchPrev: nullable(arrayOf(num, LIMITS.sketch)),
});

// Rules that relate fields to each other (docs/protocol.md section 8 lists them with their ids).

/** runStarted.unique-layer-names, runStarted.sketch-listed, runStarted.sketch-count, runStarted.sketch-in-weight. */
function checkLayers(record: RunStartedRecord, p: string): void {
  const names = new Set<string>();
  const listed = record.layers.length > 0 && record.layers[0]!.sketchIndices !== undefined;
  record.layers.forEach((layer, i) => {
    const at = `${p}.layers[${i}]`;
    if (names.has(layer.name)) throw new ValidationError(`${at}.name`, 'a layer name not used by an earlier layer (names are unique in a run)', layer.name);
    names.add(layer.name);
    const indices = layer.sketchIndices;
    if ((indices !== undefined) !== listed) {
      throw new ValidationError(`${at}.sketchIndices`, `listed by every layer or by none (layers[0] ${listed ? 'lists them' : 'does not'})`, indices);
    }
    if (indices === undefined) return;
    if (indices.length > record.config.sketchSize) throw new ValidationError(`${at}.sketchIndices`, `at most config.sketchSize = ${record.config.sketchSize} indices`, indices);
    const weight = layer.outFeatures * layer.inFeatures;
    for (let j = 0; j < indices.length; j++) {
      if (indices[j]! >= weight) throw new ValidationError(`${at}.sketchIndices[${j}]`, `an index into the ${layer.outFeatures}×${layer.inFeatures} weight (below ${weight})`, indices[j]);
    }
  });
}

/** layerStats.operand-pair, layerStats.blocks-sum, layerStats.exponent-range, layerStats.wgradError-on-wgrad, layerStats.sketch-prev-length. */
function checkLayerStats(record: LayerStatsRecord, p: string): void {
  const pair = GEMM_OPERANDS[record.gemm];
  const operands = record.operands;
  if (operands.length !== 2) throw new ValidationError(`${p}.operands`, `the ${record.gemm} GEMM's two operands [${pair.join(', ')}]`, operands);
  for (let i = 0; i < 2; i++) {
    const operand = operands[i]!;
    const at = `${p}.operands[${i}]`;
    if (operand.operand !== pair[i]) throw new ValidationError(`${at}.operand`, `"${pair[i]}" (${record.gemm} operands are [${pair.join(', ')}] in this order)`, operand.operand);
    const { counts, minExp, nanBlocks } = operand.histogram;
    let blocks = nanBlocks;
    for (let b = 0; b < counts.length; b++) blocks += counts[b]!;
    if (operand.blocks !== blocks) throw new ValidationError(`${at}.blocks`, `sum(histogram.counts) + histogram.nanBlocks = ${blocks}`, operand.blocks);
    if (minExp + counts.length - 1 > MAX_SCALE_EXP) {
      throw new ValidationError(`${at}.histogram.counts`, `at most ${MAX_SCALE_EXP - minExp + 1} bins from minExp ${minExp} (exponents end at ${MAX_SCALE_EXP})`, counts);
    }
  }
  const error = record.wgradError;
  if (error === undefined) return;
  if (record.gemm !== 'wgrad') throw new ValidationError(`${p}.wgradError`, `no wgradError on a ${record.gemm} record (it describes the Wgrad GEMM only)`, error);
  if (error.sketchPrev !== null && error.sketchPrev.length !== error.sketch.length) {
    throw new ValidationError(`${p}.wgradError.sketchPrev`, `null or ${error.sketch.length} entries, as many as sketch`, error.sketchPrev);
  }
}

/** The full layerStats schema: every field and rule, with the path of the first that is wrong. */
export const layerStatsSchema: Schema<LayerStatsRecord> = refined(
  object<LayerStatsRecord>({
    type: literal('layerStats'),
    runId,
    step: nonNegInt,
    layer: str(LIMITS.name),
    gemm: literal(...GEMM_KINDS),
    precision: literal(...PRECISIONS),
    operands: arrayOf(operandStatsSchema, 2),
    wgradError: optional(wgradErrorSchema),
    simulated: optional(bool),
  }),
  checkLayerStats,
);

// The fast path for layerStats, most of what a host receives (672 records per stats step of an
// 8B-sized run). The schema above walks each field through a closure and builds its path string
// whether or not the field is wrong, which cost about as much as JSON.parse itself. This predicate
// makes the same checks inline and builds nothing; it answers only "valid or not", so a record it
// does not accept goes through the schema, which names what was wrong. It must never accept what
// the schema refuses (test/protocol/layer-stats-fast.test.ts fuzzes the pair).

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= Number.MAX_SAFE_INTEGER;
}
function isFraction(v: unknown): boolean {
  return typeof v === 'number' && v >= 0 && v <= 1;
}
function isNullableFinite(v: unknown): boolean {
  return v === null || (typeof v === 'number' && Number.isFinite(v));
}
function isNorm(v: unknown): boolean {
  return typeof v === 'number' && v >= 0 && v <= Number.MAX_VALUE;
}
function isFiniteArray(v: unknown): v is unknown[] {
  if (!Array.isArray(v) || v.length > LIMITS.sketch) return false;
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isFinite(x)) return false;
  }
  return true;
}

/** An operand's fields, its format's shape, layerStats.blocks-sum and layerStats.exponent-range. */
function isValidOperand(v: unknown, expected: Operand): boolean {
  if (!isObject(v) || v.operand !== expected) return false;
  const { format, blockSize, kernel, histogram } = v;
  if (!isNonNegInt(v.blocks) || !isNonNegInt(v.elements) || !isFraction(v.saturatedFrac) || !isFraction(v.flushedFrac) || !isNullableFinite(v.sqnrDb)) return false;
  if (kernel !== undefined && typeof kernel !== 'boolean') return false;
  if (format !== undefined && !(STATS_FORMATS as readonly unknown[]).includes(format)) return false;
  if (blockSize !== undefined && blockSize !== 16 && blockSize !== 32 && blockSize !== 256) return false;
  if (!isObject(histogram)) return false;
  const { kind, minExp, counts, nanBlocks } = histogram;
  if (kind !== undefined && !(SCALE_KINDS as readonly unknown[]).includes(kind)) return false;
  if (typeof minExp !== 'number' || !Number.isInteger(minExp) || minExp < -127 || minExp > 127 || !isNonNegInt(nanBlocks)) return false;
  if (!Array.isArray(counts) || counts.length > LIMITS.histogramBins) return false;
  let blocks = nanBlocks;
  for (let b = 0; b < counts.length; b++) {
    const count: unknown = counts[b];
    if (!isNonNegInt(count)) return false;
    blocks += count;
  }
  if (v.blocks !== blocks || minExp + counts.length - 1 > MAX_SCALE_EXP) return false;
  const shape = FORMAT_SHAPES[(format as StatsFormat | undefined) ?? 'mxfp4'];
  const scaleKind = (kind as ScaleKind | undefined) ?? 'e8m0';
  if (scaleKind !== shape.kind || !shape.blockSizes.includes((blockSize as number | undefined) ?? 32)) return false;
  return scaleKind !== 'e4m3' || (minExp >= 0 && minExp + counts.length - 1 <= MAX_E4M3_SCALE_CODE);
}

function isValidWgradError(v: unknown): boolean {
  if (!isObject(v)) return false;
  const { sketch, sketchPrev } = v;
  if (!isNorm(v.gradNorm) || !isNorm(v.errNorm)) return false;
  if (!isNullableFinite(v.relErr) || !isNullableFinite(v.cosErrGrad) || !isNullableFinite(v.alignment) || !isNullableFinite(v.gradToErr) || !isNullableFinite(v.lag1Cos)) return false;
  if (!isFiniteArray(sketch)) return false;
  return sketchPrev === null || (isFiniteArray(sketchPrev) && sketchPrev.length === sketch.length);
}

/** True only for a layerStats record `layerStatsSchema` accepts (its `type` already matched). */
export function isValidLayerStats(v: unknown): boolean {
  if (!isObject(v) || v.type !== 'layerStats') return false;
  const { runId, layer, gemm, operands, wgradError, simulated } = v;
  if (typeof runId !== 'string' || runId.length > 256 || typeof layer !== 'string' || layer.length > LIMITS.name || !isNonNegInt(v.step)) return false;
  if (!(PRECISIONS as readonly unknown[]).includes(v.precision) || (simulated !== undefined && typeof simulated !== 'boolean')) return false;
  if (!(GEMM_KINDS as readonly unknown[]).includes(gemm) || !Array.isArray(operands) || operands.length !== 2) return false;
  const pair = GEMM_OPERANDS[gemm as GemmKind];
  if (!isValidOperand(operands[0], pair[0]) || !isValidOperand(operands[1], pair[1])) return false;
  return wgradError === undefined || (gemm === 'wgrad' && isValidWgradError(wgradError));
}

/** runEnded.diverged-step: a diverged run names the step whose loss diverged. */
function checkRunEnded(record: RunEndedRecord, p: string): void {
  if (record.status === 'diverged' && record.step < 0) throw new ValidationError(`${p}.step`, 'the step whose loss diverged (≥ 0) when status is "diverged"', record.step);
}

export const telemetryRecordSchema: Schema<TelemetryRecord> = union<TelemetryRecord>({
  runStarted: refined(
    object<RunStartedRecord>({
      type: literal('runStarted'),
      runId,
      name: str(LIMITS.name),
      startedAt: isoDateTime,
      trainer: object<RunStartedRecord['trainer']>({ name: str(128), version: str(64) }),
      config: runConfigSchema,
      layers: arrayOf(layerInfoSchema, LIMITS.layers),
      resumedFrom: optional(object<{ path: string; step: number }>({ path: str(4096), step: nonNegInt })),
      logDir: optional(str(4096)),
    }),
    checkLayers,
  ),
  step: object<StepRecord>({
    type: literal('step'),
    runId,
    step: nonNegInt,
    tokens: nonNegInt,
    loss: lossValue,
    lr: num,
    gradNorm: ratio,
    stepMs: numIn(0, Number.MAX_VALUE),
    denseStats: optional(object<{ until: number; reason: string }>({ until: nonNegInt, reason: str(512) })),
  }),
  layerStats: fastPath(isValidLayerStats, layerStatsSchema),
  validation: object<ValidationRecord>({ type: literal('validation'), runId, step: nonNegInt, tokens: nonNegInt, loss: lossValue }),
  runEnded: refined(
    object<RunEndedRecord>({
      type: literal('runEnded'),
      runId,
      step: intIn(-1, Number.MAX_SAFE_INTEGER),
      status: literal(...RUN_END_STATUSES),
      reason: str(4096),
      endedAt: isoDateTime,
    }),
    checkRunEnded,
  ),
  checkpointSaved: object<CheckpointSavedRecord>({ type: literal('checkpointSaved'), runId, step: nonNegInt, path: str(4096), reason: optional(str(512)) }),
});

/** JSON cannot carry NaN/Inf: publishers send null for non-finite values of nullable fields. */
export function finiteOrNull(value: number): number | null {
  return Number.isFinite(value) ? value : null;
}

/**
 * A float32 value as publishers send it: 9 significant digits, which name every float32 exactly
 * (Math.fround of the parsed number gives it back) in about half the characters of its float64
 * text. Sketches are float32 and most of a wgrad layerStats frame; parsing their digits is most of
 * what ingest costs a host.
 */
export function float32Digits(value: number): number {
  return Number(value.toPrecision(9));
}

// Telemetry records: what a trainer (the TypeScript emulation or a native bridge) publishes, what a
// run log stores one per line (NDJSON), and what the extension draws. Every record names its run.
import { runConfigSchema, GEMM_KINDS, PRECISIONS, type GemmKind, type Precision, type RunConfig } from './config.js';
import { arrayOf, int, intIn, literal, nonNegInt, nullable, num, numIn, object, optional, str, union, type Schema } from './validate.js';

export const OPERANDS = ['x', 'w', 'dy'] as const;
/** `x`: the layer input (activations), `w`: the weight, `dy`: the gradient of the layer output. */
export type Operand = (typeof OPERANDS)[number];

/** The two operands of each GEMM, in the order `LayerStatsRecord.operands` lists them. */
export const GEMM_OPERANDS: Record<GemmKind, readonly [Operand, Operand]> = {
  fprop: ['x', 'w'],
  dgrad: ['dy', 'w'],
  wgrad: ['dy', 'x'],
};

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
   */
  sketchIndices: number[];
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
}

/** Exact E8M0 block-scale exponent histogram: no rebinning. */
export interface ScaleHistogram {
  /** Unbiased exponent of counts[0]. */
  minExp: number;
  /** counts[i] = blocks whose unbiased shared exponent is minExp + i (E8M0 range −127..127). */
  counts: number[];
  /** Blocks with the NaN scale (0xFF): the block held NaN or ±Inf. */
  nanBlocks: number;
}

/** How one operand of one GEMM quantizes to MXFP4 (with that GEMM's rotation), blocks along the reduction dim. */
export interface OperandStats {
  operand: Operand;
  /** Number of 32-element blocks; equals sum(histogram.counts) + histogram.nanBlocks. */
  blocks: number;
  elements: number;
  histogram: ScaleHistogram;
  /** Fraction of elements clamped to ±6 (scaled magnitude ≥ 6 before rounding, i.e. above the top code's value). */
  saturatedFrac: number;
  /** Fraction of non-zero inputs that quantized to zero. */
  flushedFrac: number;
  /** 10·log10(‖x‖² / ‖x − q(x)‖²); null when the operand is all zero or non-finite. */
  sqnrDb: number | null;
}

/**
 * The Wgrad error E = ∇Ŵ − ∇W, where ∇Ŵ is the weight gradient computed at the GEMM's configured
 * precision and ∇W the exact fp32 product. Ratios are null where a norm is zero.
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
 * A run's status as a receiver (run store, Runs view, dashboard) knows it: live, ended, or `unknown`
 * when records arrived for a run whose runStarted was never seen (e.g. a replay gap).
 */
export const RUN_STATUSES = ['running', 'unknown', ...RUN_END_STATUSES] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface RunEndedRecord {
  type: 'runEnded';
  runId: string;
  /** The last step executed (for `diverged`: the step whose loss diverged). */
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
}

export type TelemetryRecord = RunStartedRecord | StepRecord | LayerStatsRecord | ValidationRecord | RunEndedRecord | CheckpointSavedRecord;
export type TelemetryType = TelemetryRecord['type'];
export const TELEMETRY_TYPES: readonly TelemetryType[] = ['runStarted', 'step', 'layerStats', 'validation', 'runEnded', 'checkpointSaved'];

// Limits keep one record bounded; a publisher over them is told which field to shrink.
export const LIMITS = { layers: 100_000, sketch: 4096, histogramBins: 256, name: 512 } as const;

const runId = str(256);
const lossValue = nullable(num);
const ratio = nullable(num);

export const layerInfoSchema = object<LayerInfo>({
  name: str(LIMITS.name),
  kind: str(64),
  block: intIn(-1, 1_000_000),
  outFeatures: intIn(1, 1 << 30),
  inFeatures: intIn(1, 1 << 30),
  sketchIndices: arrayOf(nonNegInt, LIMITS.sketch),
});

export const histogramSchema = object<ScaleHistogram>({
  minExp: intIn(-127, 127),
  counts: arrayOf(nonNegInt, LIMITS.histogramBins),
  nanBlocks: nonNegInt,
});

const operandStatsSchema = object<OperandStats>({
  operand: literal(...OPERANDS),
  blocks: nonNegInt,
  elements: nonNegInt,
  histogram: histogramSchema,
  saturatedFrac: numIn(0, 1),
  flushedFrac: numIn(0, 1),
  sqnrDb: ratio,
});

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

export const telemetryRecordSchema: Schema<TelemetryRecord> = union<TelemetryRecord>({
  runStarted: object<RunStartedRecord>({
    type: literal('runStarted'),
    runId,
    name: str(LIMITS.name),
    startedAt: str(64),
    trainer: object<RunStartedRecord['trainer']>({ name: str(128), version: str(64) }),
    config: runConfigSchema,
    layers: arrayOf(layerInfoSchema, LIMITS.layers),
    resumedFrom: optional(object<{ path: string; step: number }>({ path: str(4096), step: nonNegInt })),
    logDir: optional(str(4096)),
  }),
  step: object<StepRecord>({
    type: literal('step'),
    runId,
    step: nonNegInt,
    tokens: nonNegInt,
    loss: lossValue,
    lr: num,
    gradNorm: ratio,
    stepMs: numIn(0, Number.MAX_VALUE),
  }),
  layerStats: object<LayerStatsRecord>({
    type: literal('layerStats'),
    runId,
    step: nonNegInt,
    layer: str(LIMITS.name),
    gemm: literal(...GEMM_KINDS),
    precision: literal(...PRECISIONS),
    operands: arrayOf(operandStatsSchema, 2),
    wgradError: optional(wgradErrorSchema),
  }),
  validation: object<ValidationRecord>({ type: literal('validation'), runId, step: nonNegInt, tokens: nonNegInt, loss: lossValue }),
  runEnded: object<RunEndedRecord>({
    type: literal('runEnded'),
    runId,
    step: int,
    status: literal(...RUN_END_STATUSES),
    reason: str(4096),
    endedAt: str(64),
  }),
  checkpointSaved: object<CheckpointSavedRecord>({ type: literal('checkpointSaved'), runId, step: nonNegInt, path: str(4096) }),
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

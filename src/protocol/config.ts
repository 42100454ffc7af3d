// Run configuration as every publisher reports it and every client may request it.
import { bool, intIn, literal, nonNegInt, num, object, optional, recordOf, str, ValidationError, type Schema } from './validate.js';

export const GEMM_KINDS = ['fprop', 'dgrad', 'wgrad'] as const;
/** Fprop: Y = X·Wᵀ. Dgrad: ∇X = ∇Y·W. Wgrad: ∇W = ∇Yᵀ·X (reduction over tokens). */
export type GemmKind = (typeof GEMM_KINDS)[number];

export const PRECISIONS = ['fp32', 'bf16', 'fp8', 'mxfp4', 'nvfp4', 'mxfp8'] as const;
/**
 * `fp8`: E4M3 for forward operands (X, W), E5M2 for gradients (∇Y), one scale per tensor.
 * `mxfp4`: E2M1 in blocks of 32 with an E8M0 scale. `nvfp4`: E2M1 in blocks of 16 with an E4M3 scale
 * and an FP32 per-tensor scale. `mxfp8`: blocks of 32 with an E8M0 scale, E4M3 elements for X and W,
 * E5M2 for ∇Y. See docs/numerics.md.
 */
export type Precision = (typeof PRECISIONS)[number];

/** Precisions quantized in blocks along the reduction dimension, where rotations and scale rules act. */
export const BLOCK_PRECISIONS = ['mxfp4', 'nvfp4', 'mxfp8'] as const;
export type BlockPrecision = (typeof BLOCK_PRECISIONS)[number];

export function isBlockPrecision(precision: Precision): precision is BlockPrecision {
  return precision === 'mxfp4' || precision === 'nvfp4' || precision === 'mxfp8';
}

/** Elements per scale block along the reduction dimension. */
export const FORMAT_BLOCK: Record<BlockPrecision, number> = { mxfp4: 32, nvfp4: 16, mxfp8: 32 };

export const ROTATIONS = ['none', 'hadamard', 'fixed-sign-hadamard', 'random-hadamard'] as const;
/**
 * Applied along the GEMM's reduction dimension to both operands, so the exact product is unchanged.
 * `hadamard`: deterministic (fixed H, no signs, the same every step). `fixed-sign-hadamard`: H with
 * random ±1 signs drawn once per run and the same every step (block 16: TransformerEngine's fixed
 * sign vector). `random-hadamard`: fresh random ±1 signs every step.
 */
export type Rotation = (typeof ROTATIONS)[number];

export const SCALE_RULES = ['floor', 'rceil', 'even'] as const;
/**
 * How an MX format (E8M0 scale) picks a block's shared exponent from its amax (docs/numerics.md):
 * `floor` floor(log2 amax) − emax (OCP, the default), `rceil` log2 of amax/max rounded up (no
 * element saturates), `even` amax first rounded to the element's precision, then floor.
 */
export type ScaleRule = (typeof SCALE_RULES)[number];

export const HADAMARD_BLOCKS = [16, 32, 64, 128] as const;
export type HadamardBlock = (typeof HADAMARD_BLOCKS)[number];

export const ROUNDINGS = ['nearest-even', 'stochastic'] as const;
export type Rounding = (typeof ROUNDINGS)[number];

/**
 * How one GEMM's operands are quantized. Rotation, rounding and scale rule act on the block
 * precisions (mxfp4, nvfp4, mxfp8); layer stats of other precisions measure MXFP4 under them.
 */
export interface GemmConfig {
  precision: Precision;
  rotation: Rotation;
  hadamardBlock: HadamardBlock;
  rounding: Rounding;
  /** Multiply by 3/4 before stochastic rounding so SR never clips (the random-Hadamard + SR recipe). */
  srPrescale: boolean;
  /** MX formats' shared-exponent rule; absent means `floor` (protocol 1.0 publishers send none). */
  scaleRule?: ScaleRule;
  /** NVFP4 only: the weight operand in 16×16 tiles (one scale per tile) instead of 1×16 blocks. */
  nvfp4Weight2d?: boolean;
}

export function scaleRuleOf(config: GemmConfig): ScaleRule {
  return config.scaleRule ?? 'floor';
}

/**
 * What is wrong with a GEMM recipe as configured, each problem naming what to change; empty when
 * it can run. `reductions` names the GEMM's reduction dimensions (e.g. { dim: 64 }) when known.
 * A Hadamard block that does not divide one is not a problem: both operands are zero-padded to its
 * next multiple (src/trainer/rotation-fit.ts, the bridge's default rule), and the format's blocks then
 * run along the padded length, which the Hadamard block (a multiple of 16) keeps whole for NVFP4.
 */
export function gemmRecipeProblems(kind: GemmKind, config: GemmConfig, reductions: Record<string, number> = {}): string[] {
  const problems: string[] = [];
  const { precision } = config;
  if (precision === 'nvfp4' && scaleRuleOf(config) !== 'floor') {
    problems.push(`${kind}: scale rule '${config.scaleRule}' is for MX formats (E8M0 scales); NVFP4's E4M3 block scales follow NVIDIA's definition — set scaleRule to floor or precision to mxfp4/mxfp8`);
  }
  if (config.nvfp4Weight2d && precision !== 'nvfp4') {
    problems.push(`${kind}: nvfp4Weight2d needs precision nvfp4 (it is ${precision}); turn it off or set precision to nvfp4`);
  }
  if ((precision === 'nvfp4' || precision === 'mxfp8') && config.rounding === 'stochastic') {
    problems.push(`${kind}: stochastic rounding is implemented for mxfp4 only; set rounding to nearest-even or precision to mxfp4`);
  }
  if ((precision === 'nvfp4' || precision === 'mxfp8') && config.srPrescale) {
    problems.push(`${kind}: srPrescale (the ¾ prescale of stochastic rounding) is implemented for mxfp4 only; turn it off or set precision to mxfp4`);
  }
  const formatBlock = isBlockPrecision(precision) ? FORMAT_BLOCK[precision] : FORMAT_BLOCK.mxfp4;
  for (const [name, length] of Object.entries(reductions)) {
    if (length % formatBlock !== 0) {
      problems.push(`${kind}: reduction dimension ${name} = ${length} is not a multiple of the ${isBlockPrecision(precision) ? precision : 'MXFP4 stats'} block ${formatBlock}; change the model shape or the precision`);
    }
  }
  return problems;
}

export type GemmConfigs = Record<GemmKind, GemmConfig>;

/** What a run's Wgrad error describes under data parallelism (RunConfig.wgradErrorScope). */
export const WGRAD_ERROR_SCOPES = ['batch', 'rank'] as const;
export type WgradErrorScope = (typeof WGRAD_ERROR_SCOPES)[number];

/**
 * What a run was started with. Core fields are typed; publisher-specific details (model shape,
 * optimizer) are free-form maps so any trainer can describe itself.
 */
export interface RunConfig {
  /** Emulation preset name, or a publisher's own label (e.g. "llama-1b"). */
  preset: string;
  seed: number;
  /** Planned number of steps; 0 when unknown (an external trainer). */
  steps: number;
  tokensPerStep: number;
  /** Layer stats are sent every `statsEvery` steps (steps where step % statsEvery === 0). */
  statsEvery: number;
  /**
   * Optional (protocol 1.3), absent = 1: an opt-in sampling of layers that cuts what a stats step
   * costs a publisher. Layer i of runStarted.layers belongs to group i % statsLayerGroups; the stats
   * step `step` reports the layers of group (step / statsEvery) % statsLayerGroups only, so each layer
   * reports exactly every statsEvery · statsLayerGroups steps. What is reported stays exact.
   */
  statsLayerGroups?: number;
  /**
   * Optional (protocol 1.4), absent = 'batch'. What each layerStats.wgradError describes when the
   * publisher trains on several data-parallel ranks. 'batch': the error of the step's gradient, the
   * mean over the ranks (E is reduced across the ranks as each layer's backward runs). 'rank'
   * (opt-in; the bridge then issues no collective in backward: cheaper under DDP): each rank's own
   * Wgrad GEMM on its own micro-batch, the record giving the mean over the ranks of each rank's sums
   * (‖E‖², ‖∇W‖², ⟨E, ∇W⟩ and the lag-1 terms, so the norms are root-mean-squares over the ranks)
   * and of its sketch entries.
   * With one process the two are the same.
   */
  wgradErrorScope?: WgradErrorScope;
  /**
   * Optional (protocol 1.5), absent = 1: every row of ∇W, exact. N > 1 is an opt-in approximation
   * that cuts what the full-tensor Wgrad error costs a publisher on a GPU: each layer's Wgrad error
   * E = ∇Ŵ − ∇W (its sums, norms, cosines, lag-1 cosine and sketch) is computed on the rows
   * r ≡ 0 (mod N) of ∇W only (every N-th output feature: r = 0, N, 2N, …). gradNorm and errNorm are
   * then scaled by √(rows / ⌈rows / N⌉) so that they estimate the full tensor's norms; relErr,
   * cosErrGrad, alignment, gradToErr and lag1Cos are those of the sampled rows (estimates of the full
   * tensor's); LayerInfo.sketchIndices all lie in sampled rows. Operand stats (histograms,
   * saturation, flush, SQNR) stay exact whatever N.
   */
  wgradErrorRowStride?: number;
  /**
   * Optional (protocol 1.8), absent = true. false is an opt-in that turns the lag-1 cosine off: the
   * publisher keeps no E_{t−1}, so the step before each stats step measures nothing (for the Python
   * bridge on a GPU, about 40 % of what observing every layer costs), and every layerStats record's
   * wgradError.lag1Cos and sketchPrev are null. Every other figure is unchanged.
   */
  wgradErrorLag1?: boolean;
  /** Number of fixed indices per layer at which the Wgrad error is sampled (see LayerInfo.sketchIndices). */
  sketchSize: number;
  /** Validation every `evalEvery` steps; 0 = never. */
  evalEvery: number;
  /** Data set name or path. */
  data: string;
  gemms: GemmConfigs;
  model: Record<string, number | string | boolean>;
  optimizer: Record<string, number | string | boolean>;
}

/** A change to the next run's configuration, as a client requests it. Absent fields stay as they are. */
export interface NextRunConfig {
  gemms?: Partial<Record<GemmKind, Partial<GemmConfig>>>;
  seed?: number;
  steps?: number;
  statsEvery?: number;
  /** Optional (protocol 1.6): RunConfig.statsLayerGroups of the next run (1 = every layer at every stats step). */
  statsLayerGroups?: number;
  /** Optional (protocol 1.6): RunConfig.wgradErrorRowStride of the next run (1 = every row, exact). */
  wgradErrorRowStride?: number;
  /** Optional (protocol 1.8): RunConfig.wgradErrorLag1 of the next run (true = lag-1 measured). */
  wgradErrorLag1?: boolean;
  preset?: string;
}

const scalar: Schema<number | string | boolean> = (v, p) => (typeof v === 'string' ? str(256)(v, p) : typeof v === 'boolean' ? v : num(v, p));

/** The fields of one GEMM's config, once: the full config and a next-run change both check them. */
const gemmConfigFields: { [K in keyof GemmConfig]-?: Schema<GemmConfig[K]> } = {
  precision: literal(...PRECISIONS),
  rotation: literal(...ROTATIONS),
  hadamardBlock: literal(...HADAMARD_BLOCKS),
  rounding: literal(...ROUNDINGS),
  srPrescale: bool,
  scaleRule: optional(literal(...SCALE_RULES)),
  nvfp4Weight2d: optional(bool),
};

export const gemmConfigSchema: Schema<GemmConfig> = object<GemmConfig>(gemmConfigFields);

export const gemmConfigsSchema: Schema<GemmConfigs> = object<GemmConfigs>({
  fprop: gemmConfigSchema,
  dgrad: gemmConfigSchema,
  wgrad: gemmConfigSchema,
});

export const runConfigSchema: Schema<RunConfig> = object<RunConfig>({
  preset: str(128),
  seed: nonNegInt,
  steps: nonNegInt,
  tokensPerStep: nonNegInt,
  statsEvery: intIn(1, 1_000_000),
  statsLayerGroups: optional(intIn(1, 1024)),
  wgradErrorScope: optional(literal(...WGRAD_ERROR_SCOPES)),
  wgradErrorRowStride: optional(intIn(1, 1024)),
  wgradErrorLag1: optional(bool),
  sketchSize: intIn(0, 4096),
  evalEvery: nonNegInt,
  data: str(4096),
  gemms: gemmConfigsSchema,
  model: recordOf(scalar, 64),
  optimizer: recordOf(scalar, 64),
});

function partialOf<T>(schemas: { [K in keyof T]-?: Schema<T[K]> }, what: string): Schema<Partial<T>> {
  return (v, p) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(p, what, v);
    // Object.hasOwn, not a lookup: "__proto__", "valueOf", "constructor"… must not find
    // Object.prototype's members (one crashed the server; others were accepted silently).
    for (const [key, value] of Object.entries(v)) {
      const schema = Object.hasOwn(schemas, key) ? (schemas as Record<string, Schema<unknown>>)[key] : undefined;
      if (schema === undefined) throw new ValidationError(`${p}.${key}`, `no such field: ${what} has ${Object.keys(schemas).join(', ')}`, value);
      if (value !== undefined) schema(value, `${p}.${key}`);
    }
    return v as Partial<T>;
  };
}

const partialGemmConfig = partialOf<GemmConfig>(gemmConfigFields, 'a GEMM config');

export const nextRunConfigSchema: Schema<NextRunConfig> = partialOf<NextRunConfig>(
  {
    gemms: partialOf<Partial<Record<GemmKind, Partial<GemmConfig>>>>(
      { fprop: partialGemmConfig, dgrad: partialGemmConfig, wgrad: partialGemmConfig },
      'a map of fprop/dgrad/wgrad',
    ),
    seed: nonNegInt,
    steps: intIn(1, 100_000_000),
    statsEvery: intIn(1, 1_000_000),
    statsLayerGroups: intIn(1, 1024),
    wgradErrorRowStride: intIn(1, 1024),
    wgradErrorLag1: bool,
    preset: str(128),
  },
  'a next-run config',
);

/** Apply a requested change to a full config; fields not named keep their value. */
export function mergeRunConfig(base: RunConfig, change: NextRunConfig): RunConfig {
  const gemms = { ...base.gemms };
  for (const kind of GEMM_KINDS) {
    const patch = change.gemms?.[kind];
    if (patch) gemms[kind] = { ...gemms[kind], ...patch };
  }
  return {
    ...base,
    gemms,
    seed: change.seed ?? base.seed,
    steps: change.steps ?? base.steps,
    statsEvery: change.statsEvery ?? base.statsEvery,
    // The opt-ins stay absent (base's own, spread above) unless the change names them.
    ...(change.statsLayerGroups !== undefined ? { statsLayerGroups: change.statsLayerGroups } : {}),
    ...(change.wgradErrorRowStride !== undefined ? { wgradErrorRowStride: change.wgradErrorRowStride } : {}),
    ...(change.wgradErrorLag1 !== undefined ? { wgradErrorLag1: change.wgradErrorLag1 } : {}),
    preset: change.preset ?? base.preset,
  };
}

const ROTATION_LABELS: Record<Rotation, string> = { none: '', hadamard: 'H', 'fixed-sign-hadamard': 'FSH', 'random-hadamard': 'RHT' };

/**
 * A short human label for a GEMM config, e.g. "mxfp4 · H16", "mxfp4 · RHT16+SR", "nvfp4 · FSH16 · 2D"
 * or "mxfp8 · rceil" (the scale rule shows when it is not the default floor).
 */
export function describeGemm(config: GemmConfig): string {
  if (!isBlockPrecision(config.precision)) return config.precision;
  const rotation = config.rotation === 'none' ? '' : `${ROTATION_LABELS[config.rotation]}${config.hadamardBlock}`;
  const rounding = config.rounding === 'stochastic' ? (config.srPrescale ? 'SR¾' : 'SR') : '';
  const recipe = [rotation, rounding].filter((part) => part !== '').join('+');
  const rule = config.precision !== 'nvfp4' && scaleRuleOf(config) !== 'floor' ? scaleRuleOf(config) : '';
  const tiles = config.precision === 'nvfp4' && config.nvfp4Weight2d ? '2D' : '';
  return [config.precision, recipe, rule, tiles].filter((part) => part !== '').join(' · ');
}

/** What a run's Wgrad error describes (RunConfig.wgradErrorScope), in the words views show. */
export function wgradErrorScopeLabel(scope: WgradErrorScope | undefined): string {
  return scope === 'rank' ? "each rank's own, mean over ranks" : 'whole batch';
}

/**
 * How a run's Wgrad error was sampled (RunConfig.wgradErrorRowStride), in the words views show;
 * '' for the default, every row (exact), which goes unsaid.
 */
function wgradErrorRowsLabel(rowStride: number | undefined): string {
  return rowStride !== undefined && rowStride > 1 ? `estimated from 1 in ${rowStride} rows` : '';
}

/** The run config's opt-ins that change what its Wgrad error figures describe or include. */
export type WgradErrorOptIns = Pick<RunConfig, 'wgradErrorScope' | 'wgradErrorRowStride' | 'wgradErrorLag1'>;

/**
 * What a run's Wgrad error describes: "whole batch", or what the opt-ins changed ("each rank's own,
 * mean over ranks", "…; estimated from 1 in 4 rows"). Without `sayDefault` the default scope goes
 * unsaid ('' for a run with no opt-in).
 */
export function wgradErrorDescription(run: WgradErrorOptIns, sayDefault = true): string {
  const scope = sayDefault || run.wgradErrorScope === 'rank' ? wgradErrorScopeLabel(run.wgradErrorScope) : '';
  const lag1 = run.wgradErrorLag1 === false ? 'no lag-1 (opt-in)' : '';
  return [scope, wgradErrorRowsLabel(run.wgradErrorRowStride), lag1].filter((part) => part !== '').join('; ');
}

/**
 * What views and alerts add beside a run's Wgrad error figures when an opt-in changed what they
 * describe: per-rank (norms, relErr and lag-1 of one rank's Wgrad GEMM rather than the ranks' mean
 * gradient) and/or sampled rows (estimates of the full tensor's); '' for the default (whole batch,
 * every row). One note, so every view and alert says the same.
 */
export function wgradErrorNote(run: WgradErrorOptIns): string {
  const description = wgradErrorDescription(run, false);
  return description === '' ? '' : `Wgrad error: ${description}`;
}

/**
 * What the rotation in a describeGemm label (H16, FSH16, RHT16) means for the Wgrad error's
 * correlation over steps, for views that only hold the label: random signs against random-over-time.
 */
export function rotationNote(label: string): string {
  if (/\bFSH\d+/.test(label)) return 'fixed random signs, same rotation every step';
  if (/\bRHT\d+/.test(label)) return 'fresh random signs every step';
  if (/\bH\d+/.test(label)) return 'deterministic, no signs';
  return '';
}

// Run configuration as every publisher reports it and every client may request it.
import { bool, intIn, literal, nonNegInt, num, object, recordOf, str, ValidationError, type Schema } from './validate.js';

export const GEMM_KINDS = ['fprop', 'dgrad', 'wgrad'] as const;
/** Fprop: Y = X·Wᵀ. Dgrad: ∇X = ∇Y·W. Wgrad: ∇W = ∇Yᵀ·X (reduction over tokens). */
export type GemmKind = (typeof GEMM_KINDS)[number];

export const PRECISIONS = ['fp32', 'bf16', 'fp8', 'mxfp4'] as const;
/** `fp8`: E4M3 for forward operands (X, W), E5M2 for gradients (∇Y). */
export type Precision = (typeof PRECISIONS)[number];

export const ROTATIONS = ['none', 'hadamard', 'random-hadamard'] as const;
/**
 * Applied along the GEMM's reduction dimension to both operands, so the exact product is unchanged.
 * `hadamard`: deterministic (fixed H, the same every step). `random-hadamard`: fresh random ±1 signs
 * every step.
 */
export type Rotation = (typeof ROTATIONS)[number];

export const HADAMARD_BLOCKS = [16, 32, 64, 128] as const;
export type HadamardBlock = (typeof HADAMARD_BLOCKS)[number];

export const ROUNDINGS = ['nearest-even', 'stochastic'] as const;
export type Rounding = (typeof ROUNDINGS)[number];

/** How one GEMM's operands are quantized. Rotation and rounding matter only for `mxfp4`. */
export interface GemmConfig {
  precision: Precision;
  rotation: Rotation;
  hadamardBlock: HadamardBlock;
  rounding: Rounding;
  /** Multiply by 3/4 before stochastic rounding so SR never clips (the random-Hadamard + SR recipe). */
  srPrescale: boolean;
}

export type GemmConfigs = Record<GemmKind, GemmConfig>;

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
    preset: change.preset ?? base.preset,
  };
}

/** A short human label for a GEMM config, e.g. "mxfp4 · H16" or "mxfp4 · RHT+SR". */
export function describeGemm(config: GemmConfig): string {
  if (config.precision !== 'mxfp4') return config.precision;
  const rotation = config.rotation === 'hadamard' ? `H${config.hadamardBlock}` : config.rotation === 'random-hadamard' ? `RHT${config.hadamardBlock}` : '';
  const rounding = config.rounding === 'stochastic' ? (config.srPrescale ? 'SR¾' : 'SR') : '';
  const parts = [rotation, rounding].filter((part) => part !== '').join('+');
  return parts ? `mxfp4 · ${parts}` : 'mxfp4';
}

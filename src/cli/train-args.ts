// Command-line flags of mxscope-train → a run (or ablation, or serve) request. Every rejection names
// the flag, what it got and what it accepts.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { GEMM_KINDS, HADAMARD_BLOCKS, PRECISIONS, ROTATIONS, ROUNDINGS, SCALE_RULES, type GemmConfig, type GemmKind, type RunConfig } from '../protocol/config.js';
import { isLoopbackHost } from '../link/auth.js';
import { ABLATION_DEFAULTS } from '../trainer/ablation.js';
import { PRESET_NAMES, presetConfig, type PresetName } from '../trainer/presets.js';

export class CliError extends Error {
  override name = 'CliError';
}

export const DEFAULT_OUT_DIR = 'mxscope-runs';

export type CliCommand =
  | { kind: 'help' }
  | { kind: 'train'; config: RunConfig; outDir: string; name?: string; checkpointEvery: number; resumeFrom?: string }
  | { kind: 'ablation'; config: RunConfig; outDir: string; targetLoss?: number; seeds: number }
  | { kind: 'serve'; config: RunConfig; outDir: string; host: string; port: number; token?: string; noToken: boolean; allowOrigins: string[]; checkpointDirs: string[] };

export const HELP = `mxscope-train: train a tiny Llama with per-GEMM MXFP4/FP8/BF16 emulation and MX Scope telemetry.

Usage: mxscope-train [options]

Run
  --preset tiny|small        model and batch preset (default tiny)
  --steps N                  training steps (default: the preset's)
  --seed N                   seed for init, data order, rounding and rotations (default 1)
  --data FILE                train on any text file (default: the shipped Brown corpus sample)
  --out DIR                  where run directories are created (default ${DEFAULT_OUT_DIR})
  --name TEXT                run label (default: derived from the GEMM settings)
  --lr X                     peak learning rate (default: the preset's)
  --stats-every N            layer stats every N steps (default 10)
  --eval-every N             validation loss every N steps; 0 = never (default: the preset's)
  --sketch-size N            Wgrad error sketch entries per layer (default 64)
  --checkpoint-every N       also checkpoint every N steps (default: only at the end)
  --resume FILE              continue from a checkpoint written by mxscope-train

Precision (each GEMM of every linear layer: fprop Y=X·Wᵀ, dgrad ∇X=∇Y·W, wgrad ∇W=∇Yᵀ·X)
  --fprop|--dgrad|--wgrad P  fp32 | bf16 | fp8 | mxfp4 | nvfp4 | mxfp8 (default fp32)
  --precision P              all three GEMMs at once (the per-GEMM flags override it)
  --rotation R               none | hadamard | fixed-sign-hadamard | random-hadamard, for
                             block-format GEMMs (default none)
  --hadamard-block B         16 | 32 | 64 | 128 (default 16)
  --rounding R               nearest-even | stochastic (default nearest-even; stochastic: mxfp4)
  --sr-prescale              scale by 3/4 before stochastic rounding so it never clips
  --scale-rule S             floor | rceil | even: how MX formats pick the shared exponent
                             (default floor, OCP)
  --nvfp4-weight-2d          NVFP4 weights in 16×16 tiles (NVIDIA's recipe) instead of 1×16
  --fprop-rotation, --dgrad-rotation, --wgrad-rotation, --fprop-rounding, ...,
  --fprop-hadamard-block, --fprop-scale-rule, ...  set one GEMM's option only

Modes
  --ablation                 run the seed paper's series (+ fixed-sign H16, 8 runs) and print
                             tokens to a target loss
  --target-loss X            the ablation's target validation loss (default: the FP8 baseline's
                             loss halfway through its run)
  --seeds N                  run the series with N seeds (--seed, --seed + 1, …) and print each
                             run's mean tokens with a 95 % interval (default 1, at most 32)
  --serve                    serve protocol v1 over websocket and run trainings on request
  --host H  --port P         where to listen (default 127.0.0.1, port 0 = any free port)
  --token T                  the token clients must present (or set MXSCOPE_TOKEN; default: a
                             random one, printed on the listening line)
  --no-token                 serve without a token (loopback only: any local user can connect)
  --allow-origin O           let browser pages from origin O connect (repeatable; default none)
  --checkpoint-dir DIR       startRun may also resume from .safetensors files under DIR
                             (repeatable; the --out directory is always allowed)
  --help                     this text
`;

const string = { type: 'string' } as const;
const flag = { type: 'boolean' } as const;
const perGemmOptions = Object.fromEntries(GEMM_KINDS.flatMap((kind) => [`${kind}-rotation`, `${kind}-rounding`, `${kind}-hadamard-block`, `${kind}-scale-rule`].map((name) => [name, string])));
const OPTIONS = {
  preset: string,
  steps: string,
  seed: string,
  data: string,
  out: string,
  name: string,
  lr: string,
  'stats-every': string,
  'eval-every': string,
  'sketch-size': string,
  'checkpoint-every': string,
  resume: string,
  fprop: string,
  dgrad: string,
  wgrad: string,
  precision: string,
  rotation: string,
  'hadamard-block': string,
  rounding: string,
  'sr-prescale': flag,
  'scale-rule': string,
  'nvfp4-weight-2d': flag,
  ablation: flag,
  'target-loss': string,
  seeds: string,
  serve: flag,
  host: string,
  port: string,
  token: string,
  'no-token': flag,
  'allow-origin': { type: 'string', multiple: true },
  'checkpoint-dir': { type: 'string', multiple: true },
  help: flag,
  ...perGemmOptions,
} as const;

function oneOf<T extends string | number>(flagName: string, value: string, allowed: readonly T[]): T {
  const match = allowed.find((option) => String(option) === value);
  if (match === undefined) throw new CliError(`--${flagName}: "${value}" is not one of ${allowed.join(', ')}`);
  return match;
}

function integer(flagName: string, value: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed) || parsed < min || parsed > max) {
    throw new CliError(`--${flagName}: "${value}" is not an integer in [${min}, ${max}]`);
  }
  return parsed;
}

function positiveNumber(flagName: string, value: string): number {
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed) || parsed <= 0) throw new CliError(`--${flagName}: "${value}" is not a positive number`);
  return parsed;
}

export function parseCliArgs(argv: string[]): CliCommand {
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new CliError(`${(error as Error).message.replace(/\s*\n\s*/g, ' ')} (see mxscope-train --help)`);
  }
  if (values.help) return { kind: 'help' };
  const text = (key: string): string | undefined => values[key] as string | undefined;

  const config = presetConfig(oneOf('preset', text('preset') ?? 'tiny', PRESET_NAMES) as PresetName);
  if (text('steps') !== undefined) config.steps = integer('steps', text('steps')!, 1, 100_000_000);
  if (text('seed') !== undefined) config.seed = integer('seed', text('seed')!, 0, 0xffffffff);
  // Absolute, so the run config names the file wherever the log is read or the run repeated.
  if (text('data') !== undefined) config.data = resolve(text('data')!);
  if (text('stats-every') !== undefined) config.statsEvery = integer('stats-every', text('stats-every')!, 1, 1_000_000);
  if (text('eval-every') !== undefined) config.evalEvery = integer('eval-every', text('eval-every')!, 0);
  if (text('sketch-size') !== undefined) config.sketchSize = integer('sketch-size', text('sketch-size')!, 0, 4096);
  if (text('lr') !== undefined) config.optimizer.lr = positiveNumber('lr', text('lr')!);

  const shared: Partial<GemmConfig> = {};
  if (text('precision') !== undefined) shared.precision = oneOf('precision', text('precision')!, PRECISIONS);
  if (text('rotation') !== undefined) shared.rotation = oneOf('rotation', text('rotation')!, ROTATIONS);
  if (text('rounding') !== undefined) shared.rounding = oneOf('rounding', text('rounding')!, ROUNDINGS);
  if (text('hadamard-block') !== undefined) shared.hadamardBlock = oneOf('hadamard-block', text('hadamard-block')!, HADAMARD_BLOCKS);
  if (values['sr-prescale']) shared.srPrescale = true;
  if (text('scale-rule') !== undefined) shared.scaleRule = oneOf('scale-rule', text('scale-rule')!, SCALE_RULES);
  for (const kind of GEMM_KINDS) config.gemms[kind] = { ...config.gemms[kind], ...shared, ...gemmOverrides(kind, text) };
  if (values['nvfp4-weight-2d']) {
    const nvfp4 = GEMM_KINDS.filter((kind) => config.gemms[kind].precision === 'nvfp4');
    if (nvfp4.length === 0) throw new CliError('--nvfp4-weight-2d needs at least one GEMM at nvfp4 (e.g. --fprop nvfp4)');
    for (const kind of nvfp4) config.gemms[kind].nvfp4Weight2d = true;
  }

  const outDir = text('out') ?? DEFAULT_OUT_DIR;
  if (values.ablation && values.serve) throw new CliError('--ablation and --serve cannot be combined: pick one mode');
  if (values.ablation) {
    const gemmFlag = Object.keys(values).find((key) => ['precision', 'rotation', 'rounding', 'hadamard-block', 'sr-prescale', 'scale-rule', 'nvfp4-weight-2d', ...GEMM_KINDS].some((name) => key === name || key.startsWith(`${name}-`)));
    if (gemmFlag !== undefined) throw new CliError(`--${gemmFlag} cannot be combined with --ablation: the ablation sets every GEMM's precision itself`);
    const defaults = ABLATION_DEFAULTS[config.preset]!;
    if (text('steps') === undefined) config.steps = defaults.steps;
    if (text('eval-every') === undefined) config.evalEvery = defaults.evalEvery;
    const targetLoss = text('target-loss') === undefined ? undefined : positiveNumber('target-loss', text('target-loss')!);
    const seeds = text('seeds') === undefined ? 1 : integer('seeds', text('seeds')!, 1, 32);
    return { kind: 'ablation', config, outDir, seeds, ...(targetLoss === undefined ? {} : { targetLoss }) };
  }
  const list = (key: string): string[] => (values[key] as string[] | undefined) ?? [];
  if (values.serve) {
    const token = text('token');
    const noToken = values['no-token'] === true;
    if (noToken && token !== undefined) throw new CliError('--no-token and --token contradict each other: pick one');
    if (noToken && !isLoopbackHost(text('host') ?? '127.0.0.1')) throw new CliError(`--no-token is refused with --host ${text('host')}: off loopback clients must present a token`);
    const port = integer('port', text('port') ?? '0', 0, 65535);
    return { kind: 'serve', config, outDir, host: text('host') ?? '127.0.0.1', port, noToken, allowOrigins: list('allow-origin'), checkpointDirs: list('checkpoint-dir'), ...(token === undefined ? {} : { token }) };
  }
  for (const modeOnly of ['target-loss', 'seeds', 'host', 'port', 'token', 'no-token', 'allow-origin', 'checkpoint-dir']) {
    if (values[modeOnly] !== undefined) throw new CliError(`--${modeOnly} only applies with ${modeOnly === 'target-loss' || modeOnly === 'seeds' ? '--ablation' : '--serve'}`);
  }
  const name = text('name');
  const resumeFrom = text('resume');
  const checkpointEvery = text('checkpoint-every') === undefined ? 0 : integer('checkpoint-every', text('checkpoint-every')!, 1);
  return { kind: 'train', config, outDir, checkpointEvery, ...(name === undefined ? {} : { name }), ...(resumeFrom === undefined ? {} : { resumeFrom }) };
}

function gemmOverrides(kind: GemmKind, text: (key: string) => string | undefined): Partial<GemmConfig> {
  const overrides: Partial<GemmConfig> = {};
  const precision = text(kind);
  const rotation = text(`${kind}-rotation`);
  const rounding = text(`${kind}-rounding`);
  const block = text(`${kind}-hadamard-block`);
  const scaleRule = text(`${kind}-scale-rule`);
  if (precision !== undefined) overrides.precision = oneOf(kind, precision, PRECISIONS);
  if (rotation !== undefined) overrides.rotation = oneOf(`${kind}-rotation`, rotation, ROTATIONS);
  if (rounding !== undefined) overrides.rounding = oneOf(`${kind}-rounding`, rounding, ROUNDINGS);
  if (block !== undefined) overrides.hadamardBlock = oneOf(`${kind}-hadamard-block`, block, HADAMARD_BLOCKS);
  if (scaleRule !== undefined) overrides.scaleRule = oneOf(`${kind}-scale-rule`, scaleRule, SCALE_RULES);
  return overrides;
}

// The emulation trainer's speed: GEMM GFLOP/s on the tiny preset's real linear-layer shapes (the
// kernel the trainer uses vs the TypeScript fallback, same run), tokens/s of a tiny training step with
// all GEMMs fp32 vs all MXFP4 (and all NVFP4, all MXFP8 against MXFP4), the cost of telemetry at statsEvery=10 (goal ≤ 10% of step time), and
// the step against PyTorch on CPU (bench/torch_step.py, same shapes, one thread) where torch is
// installed: blocks of ours and of PyTorch's steps alternate, so contention hits both alike
// (goal ≤ 1.5× PyTorch at fp32, ≤ 1.2× at MXFP4).
import { fakeQuantMxfp4, gemm, Rng, setMxBackend } from '../src/mx/index.js';
import type { Precision, RunConfig } from '../src/protocol/config.js';
import { modelShape } from '../src/trainer/model.js';
import { presetConfig, type PresetName } from '../src/trainer/presets.js';
import { Trainer } from '../src/trainer/trainer.js';
import { bestSeconds, cpuDescription, fmt } from './timing.js';
import { mxEdgeCaseValues, startTorch, torchFakeQuantDiffers, type TorchBaseline } from './torch-baseline.js';

const NEVER = 1_000_000;

function config(precision: Precision, statsEvery: number, preset: PresetName = 'tiny'): RunConfig {
  const c = presetConfig(preset);
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) c.gemms[kind].precision = precision;
  c.statsEvery = statsEvery;
  c.evalEvery = 0;
  c.steps = NEVER;
  return c;
}

const PERIOD = 10;
const BLOCKS = 5;
const sink = (record: object): void => void JSON.stringify(record); // the run log's serialization cost

/**
 * Best (least disturbed) mean step CPU time over blocks of PERIOD steps, for each config, measured block
 * by block in turn so that contention on a shared machine hits all of them alike. A block of 10
 * steps at statsEvery=10 holds one stats step and one lag-1 error step: the mix of a long run.
 */
function stepSeconds(configs: RunConfig[]): number[] {
  const trainers = configs.map((c) => new Trainer(c, 'bench'));
  for (const trainer of trainers) for (let i = 0; i < PERIOD; i++) trainer.step(sink); // warm-up, incl. step 0
  const best = configs.map(() => Infinity);
  for (let block = 0; block < BLOCKS; block++) {
    trainers.forEach((trainer, i) => {
      const start = cpuSecondsNow();
      for (let s = 0; s < PERIOD; s++) trainer.step(sink);
      best[i] = Math.min(best[i]!, (cpuSecondsNow() - start) / PERIOD);
    });
  }
  return best;
}

const shape = modelShape(presetConfig('tiny'));
const T = shape.batch * shape.seqLen;
const layerShapes: [string, number, number][] = [
  ['q/k/v/o', shape.dim, shape.dim],
  ['gate/up', shape.hidden, shape.dim],
  ['down', shape.dim, shape.hidden],
  ['lm_head', shape.vocab, shape.dim],
];
const rng = new Rng(1);
const random = (n: number): Float32Array => Float32Array.from({ length: n }, () => rng.nextFloat() - 0.5);

console.log(`GEMMs of the tiny preset (tokens T=${T}); GFLOP/s, best of several`);
console.log('layer     gemm   M×N×K                  trainer kernel   TS fallback   ratio');
for (const [name, out, inF] of layerShapes) {
  const gemms: [string, number, number, number][] = [
    ['fprop', T, out, inF],
    ['dgrad', T, inF, out],
    ['wgrad', out, inF, T],
  ];
  for (const [kind, M, N, K] of gemms) {
    const a = random(M * K);
    const b = random(N * K);
    const c = new Float32Array(M * N);
    const flops = 2 * M * N * K;
    const repeats = Math.max(5, Math.round(2e8 / flops));
    const rate = (): number => flops / bestSeconds(() => gemm(M, N, K, a, false, b, true, c), repeats) / 1e9;
    setMxBackend('auto');
    const fast = rate();
    setMxBackend('ts');
    const ts = rate();
    setMxBackend('auto');
    console.log(`${name.padEnd(10)}${kind.padEnd(7)}${`${M}×${N}×${K}`.padEnd(20)}${fmt(fast)}     ${fmt(ts)}     ${fmt(fast / ts, 1)}×`);
  }
}

function cpuSecondsNow(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

function spread(values: number[], digits = 2): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[0]!.toFixed(digits)}/${sorted[Math.floor(sorted.length / 2)]!.toFixed(digits)}/${sorted[sorted.length - 1]!.toFixed(digits)}`;
}

/**
 * Our step against PyTorch's on the same preset and precision: ROUNDS rounds, each one block of our
 * steps then one block of PyTorch's, timed by process CPU time (both single-threaded; CPU time is
 * what contention disturbs least). Prints ms/step and the ratio as min/median/max over the rounds.
 */
async function versusTorch(torch: TorchBaseline): Promise<void> {
  const ROUNDS = Number(process.env.MXSCOPE_BENCH_ROUNDS ?? 5);
  console.log(`\nstep vs PyTorch (${torch.describe}; ${cpuDescription()}); ms of CPU per step and ours/PyTorch, min/median/max over ${ROUNDS} alternating rounds`);
  console.log('preset precision  steps/block   ours ms/step           PyTorch ms/step        ours / PyTorch   goal');
  for (const preset of ['tiny', 'small'] as PresetName[]) {
    for (const precision of ['fp32', 'mxfp4'] as Precision[]) {
      const steps = preset === 'tiny' ? 10 : 3;
      const trainer = new Trainer(config(precision, NEVER, preset), 'bench');
      for (let i = 0; i < 3; i++) trainer.step(sink);
      await torch.run(preset, precision, 3); // warm-up
      const ours: number[] = [];
      const theirs: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const start = cpuSecondsNow();
        for (let s = 0; s < steps; s++) trainer.step(sink);
        ours.push(((cpuSecondsNow() - start) / steps) * 1000);
        theirs.push(((await torch.run(preset, precision, steps)).cpu / steps) * 1000);
      }
      const ratios = ours.map((o, i) => o / theirs[i]!);
      const goal = precision === 'fp32' ? 1.5 : 1.2;
      const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
      console.log(`${preset.padEnd(7)}${precision.padEnd(11)}${String(steps).padStart(6)}        ${spread(ours, 1).padEnd(23)}${spread(theirs, 1).padEnd(23)}${spread(ratios).padEnd(17)}≤ ${goal}× ${median <= goal ? 'met' : 'not met'} (median)`);
    }
  }
}

async function main(): Promise<void> {
  const [fp32, mxfp4, fp32Stats, mxfp4Stats, nvfp4Stats, mxfp8Stats] = stepSeconds([
    config('fp32', NEVER), config('mxfp4', NEVER), config('fp32', PERIOD), config('mxfp4', PERIOD), config('nvfp4', PERIOD), config('mxfp8', PERIOD),
  ]);
  console.log(`\ntiny training step (${T} tokens), best mean CPU time over ${BLOCKS} blocks of ${PERIOD} steps`);
  console.log(`all fp32     ${fmt(fp32! * 1000, 1)} ms/step ${fmt(T / fp32!, 0)} tokens/s`);
  console.log(`all mxfp4    ${fmt(mxfp4! * 1000, 1)} ms/step ${fmt(T / mxfp4!, 0)} tokens/s   (${fmt(mxfp4! / fp32!, 2)}× the fp32 step)`);
  // The production recipes against MXFP4 (the baseline), all with telemetry at statsEvery=10.
  for (const [precision, seconds] of [['nvfp4', nvfp4Stats!], ['mxfp8', mxfp8Stats!]] as const) {
    console.log(`all ${precision}, statsEvery=${PERIOD}: ${fmt(seconds * 1000, 1)} ms/step (${fmt(seconds / mxfp4Stats!, 2)}× all mxfp4 at statsEvery=${PERIOD})`);
  }
  for (const [precision, without, withStats] of [['fp32', fp32!, fp32Stats!], ['mxfp4', mxfp4!, mxfp4Stats!]] as const) {
    const overhead = (withStats / without - 1) * 100;
    console.log(`telemetry at statsEvery=${PERIOD}, all ${precision.padEnd(5)}: ${fmt(withStats * 1000, 1)} vs ${fmt(without * 1000, 1)} ms/step = ${fmt(overhead, 1)}% (goal ≤ 10%)`);
  }
  const torch = await startTorch();
  if (typeof torch === 'string') {
    console.log(`\nstep vs PyTorch: skipped, ${torch}`);
    return;
  }
  try {
    const values = mxEdgeCaseValues(32 * 4096, new Rng(3));
    const expected = values.slice();
    fakeQuantMxfp4(expected, 256);
    const differing = torchFakeQuantDiffers(values, expected, 256);
    console.log(`\nPyTorch fake-quant vs src/mx on ${values.length} edge-case values: ${differing} differ in bits`);
    if (differing > 0) throw new Error('bench/torch_step.py fake-quant is not bit-identical to src/mx');
    await versusTorch(torch);
  } finally {
    torch.close();
  }
}

void main();

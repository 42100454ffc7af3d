// WebAssembly and JIT warm-up: the first calls of a fresh process against later ones, without and
// with the start-up warm-up (src/trainer/warm-up.ts, which the trainer server runs right after it
// starts listening). Each measurement is a fresh child process (a fresh V8), cold and warm
// alternating. Baseline in the same run: the same process's steady-state calls (the 4th onwards).
// Goal: no cold-tier penalty a user can feel (first call within ~1.2× of steady state). The
// checkpoint lines analyse a 1 GiB BF16 file written here (page cache hot), as the checkpoint editor
// does in the extension host, which runs no warm-up: its first pass also pays the first touch of
// the chunk buffers, which later analyses reuse.
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../src/checkpoint/analysis.js';
import { openCheckpoint } from '../src/checkpoint/checkpoint.js';
import { writeBf16Checkpoint } from './bf16-checkpoint.js';
import { fakeQuantMxfp4, gemm, Rng, setMxBackend } from '../src/mx/index.js';
import type { RunConfig } from '../src/protocol/config.js';
import { presetConfig } from '../src/trainer/presets.js';
import { Trainer } from '../src/trainer/trainer.js';
import { warmUpTrainer } from '../src/trainer/warm-up.js';

// Every process of this bench (the parent and each measured child) selects its kernels at start-up, as the trainer's does.
setMxBackend('auto');

const CALLS = 8;
const PAIRS = Number(process.env.MXSCOPE_BENCH_ROUNDS ?? 3);

const JOBS = {
  fakeQuant: 'fakeQuantMxfp4, 16 M floats',
  gemm: 'gemm 512×512×512 (first call grows memory)',
  step: 'tiny mxfp4 training step (first plain step)',
  checkpointHistogram: 'checkpoint histogram pass, 1 GiB BF16',
  checkpointFull: 'checkpoint default full pass, 1 GiB BF16',
} as const;
type Job = keyof typeof JOBS;

interface Child {
  warmUpMs: number;
  /** CPU ms of each call, in order. */
  calls: number[];
}

/** CPU ms of every thread (the checkpoint reads run on libuv's). */
async function cpuMs(run: () => void | Promise<void>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const { user, system } = process.cpuUsage(start);
  return (user + system) / 1000;
}

function stepConfig(): RunConfig {
  const config = presetConfig('tiny');
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) config.gemms[kind].precision = 'mxfp4';
  config.statsEvery = 1_000_000;
  config.evalEvery = 0;
  config.steps = 1_000_000;
  return config;
}

/** The job's call, with its inputs made (and first touched) before any timing. */
function prepare(job: Job, checkpointPath: string): () => void | Promise<void> {
  if (job === 'checkpointHistogram' || job === 'checkpointFull') {
    const options = { ...DEFAULT_ANALYSIS_OPTIONS, ...(job === 'checkpointHistogram' ? { mode: 'histogram' as const } : {}) };
    return async () => {
      const checkpoint = await openCheckpoint(checkpointPath);
      try {
        await analyseCheckpoint(checkpoint, options);
      } finally {
        await checkpoint.close();
      }
    };
  }
  const rng = new Rng(1);
  if (job === 'step') {
    const trainer = new Trainer(stepConfig(), 'warm-up-bench');
    trainer.step(() => {}); // step 0 collects stats; the timed steps are plain ones
    return () => void trainer.step(() => {});
  }
  const N = job === 'gemm' ? 512 * 512 : 16 * 1024 * 1024;
  const source = Float32Array.from({ length: N }, () => rng.nextFloat() - 0.5);
  const work = new Float32Array(N).fill(1); // first-touch page faults before the timing
  if (job === 'gemm') return () => gemm(512, 512, 512, source, false, source, true, work);
  return () => {
    work.set(source);
    fakeQuantMxfp4(work, 4096);
  };
}

async function measure(job: Job, warm: boolean, checkpointPath: string): Promise<Child> {
  let warmUpMs = 0;
  if (warm) {
    warmUpMs = warmUpTrainer();
    await new Promise((resolve) => setTimeout(resolve, 200)); // the optimizing compiles finish off the main thread
  }
  const call = prepare(job, checkpointPath);
  const calls: number[] = [];
  for (let i = 0; i < CALLS; i++) calls.push(await cpuMs(call));
  return { warmUpMs, calls };
}

function inChild(job: Job, warm: boolean, checkpointPath: string): Child {
  const result = spawnSync(process.execPath, ['--import', 'tsx', __filename, '--measure', job, warm ? 'warm' : 'cold', checkpointPath], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`bench child failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Child;
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function spread(values: number[], digits = 2): string {
  const sorted = [...values].sort((x, y) => x - y);
  return `${sorted[0]!.toFixed(digits)}/${median(sorted).toFixed(digits)}/${sorted[sorted.length - 1]!.toFixed(digits)}`;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'mxscope-bench-'));
  try {
    const checkpointPath = join(dir, 'weights.safetensors');
    await writeBf16Checkpoint(checkpointPath, 32);
    report(checkpointPath);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function report(checkpointPath: string): void {
  const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
  console.log(`load average (1, 5, 15 min) at the start: ${load()}`);
  console.log(`first call ÷ steady state (median of calls 4-${CALLS} in the same process), CPU time; min/median/max over ${PAIRS} fresh processes per line and mode, cold and warm alternating (2 cores shared: loaded)`);
  console.log(`${'call'.padEnd(46)}${'first ms, cold'.padEnd(24)}${'cold first÷steady'.padEnd(20)}${'first ms, warmed'.padEnd(24)}warmed first÷steady`);
  const warmUps: number[] = [];
  for (const job of Object.keys(JOBS) as Job[]) {
    const runs: Record<'cold' | 'warm', Child[]> = { cold: [], warm: [] };
    for (let pair = 0; pair < PAIRS; pair++) {
      runs.cold.push(inChild(job, false, checkpointPath));
      runs.warm.push(inChild(job, true, checkpointPath));
    }
    warmUps.push(...runs.warm.map((child) => child.warmUpMs));
    const ratio = (child: Child) => child.calls[0]! / median(child.calls.slice(3));
    const first = (list: Child[]) => spread(list.map((child) => child.calls[0]!), 1);
    console.log(`${JOBS[job].padEnd(46)}${first(runs.cold).padEnd(24)}${spread(runs.cold.map(ratio)).padEnd(20)}${first(runs.warm).padEnd(24)}${spread(runs.warm.map(ratio))}`);
  }
  console.log(`load average at the end: ${load()}`);
  console.log(`start-up warm-up itself: ${spread(warmUps, 0)} ms wall (off the hot path: the trainer server runs it after it starts listening)`);
}

if (process.argv[2] === '--measure') void measure(process.argv[3] as Job, process.argv[4] === 'warm', process.argv[5]!).then((child) => process.stdout.write(JSON.stringify(child)));
else void main();

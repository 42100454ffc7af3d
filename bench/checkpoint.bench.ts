// Checkpoint analysis scan rate and memory on BF16 files made here (1 GiB and 0.25 GiB, deleted
// afterwards). Baseline in the same run: a raw read of the same file through the analysis's own
// chunk reader (SafetensorsFile.chunks, same chunk size, same double buffering), doing nothing with
// the bytes. Each measurement runs in a fresh child process so its peak RSS is its own; memory use
// should not depend on the file size. Each child runs its pass once untimed, then times passes until
// 1 GiB (1 pass on the 1 GiB file, 16 on the 64 MiB one) or 1 s has gone by: the page cache is hot
// (the file was just written) and one-time costs (module compiles, JIT, and the first touch of the chunk
// buffers: ~55 ms per fresh 16 MiB buffer on this machine) are out of the figure.
// The raw read keeps its two buffers between its passes, as the analysis keeps its (pooled resident
// kernel buffers), so neither pays the first touch again and the baseline no longer depends on the
// file size (it did while the raw read allocated fresh buffers every pass: 0.4 GB/s at 64 MiB).
// Goals: histogram pass ≥ 0.75× raw read, default full pass ≥ 0.5× raw read, on the 1 GiB file.
// The histogram pass runs on the 'auto' backend (WebAssembly where it loads) and, for comparison, on
// the TypeScript loops.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setMxBackend } from '../src/mx/index.js';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../src/checkpoint/analysis.js';
import type { AnalysisOptions } from '../src/protocol/checkpoint-report.js';
import { openCheckpoint, type CheckpointTensor } from '../src/checkpoint/checkpoint.js';
import { sampleWorkerCount, setSampleWorkers, startSampleWorkers } from '../src/checkpoint/sqnr-workers.js';
import { COLS, ROWS, TENSOR_BYTES, writeBf16Checkpoint } from './bf16-checkpoint.js';
import { cpuDescription, fmt } from './timing.js';

/** Each measurement times whole passes over its file until this much data, or this long, has gone by. */
const TIMED_BYTES = 2 ** 30;
/**
 * The default full report of the 1 GiB file (bf16-checkpoint.ts writes the same bits every time),
 * without timing, paths (path, shards) and the chunk size (which changes no figure), as the code
 * before the sample workers (main at 04cdec3) gave it.
 */
const FULL_REPORT_SHA256 = '2c21b33d204dd4faa48319cfb8b6b7d60d8f667fdf3e27d9d72e3d4c1bda33ba';
const TIMED_SECONDS = 1;
const MODES = ['idle', 'read', 'histogram', 'histogram-ts', 'full', 'full-1thread', 'sqnr-all'] as const;
type Mode = (typeof MODES)[number];

interface Measurement {
  seconds: number;
  /** User + system CPU time of the whole process (every thread): less disturbed by a busy machine than wall time. */
  cpuSeconds: number;
  bytes: number;
  maxRssMiB: number;
  /** Which kernels ran. */
  path: 'wasm' | 'ts';
  /** SHA-256 of the last pass's report without its timing and its (temporary) paths: where the sample ran must not change a bit. */
  digest: string;
}

let rawBuffers: readonly [Uint8Array, Uint8Array] | undefined;

/**
 * Every tensor's bytes through the chunk reader the analysis uses, in its chunk size, untouched, into
 * two buffers kept between passes, reading ahead across tensors as the analysis does.
 */
async function rawRead(path: string, chunkBytes: number): Promise<number> {
  const checkpoint = await openCheckpoint(path);
  const buffers = (rawBuffers ??= [new Uint8Array(chunkBytes), new Uint8Array(chunkBytes)]);
  const chunkElements = (tensor: CheckpointTensor): number => {
    const cols = tensor.shape[tensor.shape.length - 1]!;
    return Math.max(1, Math.floor(chunkBytes / (cols * (tensor.byteLength / tensor.elements)))) * cols;
  };
  let total = 0;
  try {
    for (let i = 0; i < checkpoint.tensors.length; i++) {
      const tensor = checkpoint.tensors[i]!;
      const next = checkpoint.tensors[i + 1];
      const then = next && next.file === tensor.file ? { info: next, chunkElements: chunkElements(next) } : undefined;
      for await (const chunk of tensor.file.chunks(tensor, chunkElements(tensor), buffers, then)) total += chunk.byteLength;
    }
    return total;
  } finally {
    await checkpoint.close();
  }
}

let digest = '';

async function analyse(path: string, options: Partial<AnalysisOptions>): Promise<number> {
  const checkpoint = await openCheckpoint(path);
  try {
    const { seconds: _, path: __, shards: ___, ...report } = await analyseCheckpoint(checkpoint, { ...DEFAULT_ANALYSIS_OPTIONS, ...options });
    const { chunkBytes: ____, ...figureOptions } = report.options;
    digest = createHash('sha256').update(JSON.stringify({ ...report, options: figureOptions })).digest('hex');
    return checkpoint.dataBytes;
  } finally {
    await checkpoint.close();
  }
}

async function measure(mode: Mode, path: string): Promise<Measurement> {
  const wasm = setMxBackend(mode === 'histogram-ts' ? 'ts' : 'auto');
  if (mode === 'full-1thread') setSampleWorkers(0);
  // Started before the untimed pass, which warms them as it warms the analysing thread: the timed
  // passes are steady state (a worker's first tensors pay its first touch and JIT, as the first pass
  // does). Only where they are used: a starting worker takes CPU from the pass beside it.
  if (mode === 'full' || mode === 'sqnr-all') await startSampleWorkers();
  const pass = (): Promise<number> =>
    mode === 'idle' ? Promise.resolve(0)
    : mode === 'read' ? rawRead(path, DEFAULT_ANALYSIS_OPTIONS.chunkBytes)
    : mode.startsWith('histogram') ? analyse(path, { mode: 'histogram' })
    : mode === 'full' || mode === 'full-1thread' ? analyse(path, {})
    : analyse(path, { sqnrRows: 0 });
  await pass(); // untimed: page cache, first-touch and compile costs out of the figure
  // Passes until a GiB of data (or a second) is timed, so a small file's figure is not a few
  // milliseconds dominated by per-pass costs.
  const started = process.hrtime.bigint();
  const cpuBefore = process.cpuUsage();
  const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9;
  let bytes = 0;
  do bytes += await pass();
  while (bytes > 0 && bytes < TIMED_BYTES && elapsed() < TIMED_SECONDS);
  const seconds = elapsed();
  const cpu = process.cpuUsage(cpuBefore);
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, bytes, maxRssMiB: process.resourceUsage().maxRSS / 1024, path: wasm ? 'wasm' : 'ts', digest };
}

function inChild(mode: Mode, path: string): Measurement {
  // Loaded the way this process was: through tsx, or as a bundle (a machine without node_modules).
  const result = spawnSync(process.execPath, [...process.execArgv, __filename, '--measure', mode, path], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`bench child ${mode} failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Measurement;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'mxscope-bench-'));
  try {
    const files = [
      { label: '1 GiB', path: join(dir, 'big.safetensors'), tensors: 32 },
      { label: '0.25 GiB', path: join(dir, 'quarter.safetensors'), tensors: 8 },
      { label: '64 MiB', path: join(dir, 'small.safetensors'), tensors: 2 },
    ];
    for (const file of files) await writeBf16Checkpoint(file.path, file.tensors);
    const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
    console.log(`load average (1, 5, 15 min) at the start: ${load()}; ${cpuDescription()}`);
    console.log(`BF16 checkpoints of ${ROWS}×${COLS} tensors (${TENSOR_BYTES >> 20} MiB each), just written (page cache hot); one child process per line, each timing passes over 1 GiB (or 1 s) after an untimed one`);
    console.log('file       pass                    GB/s  seconds  GB/CPU-s  peak RSS MiB   × raw read (wall, CPU)');
    const idle = inChild('idle', files[0].path);
    console.log(`${'-'.padEnd(10)} ${'node + tsx, no work'.padEnd(20)}${' '.repeat(28)}${fmt(idle.maxRssMiB, 0)}`);
    const plan: [number, Mode, string][] = [
      [0, 'read', 'raw read (baseline)'],
      [0, 'histogram', 'histogram pass'],
      [0, 'histogram-ts', 'histogram pass'],
      [0, 'full-1thread', `full, sample in-thread`],
      [0, 'full', `full, ${sampleWorkerCount()} sample worker${sampleWorkerCount() === 1 ? '' : 's'}`],
      [1, 'read', 'raw read (baseline)'],
      [1, 'histogram', 'histogram pass'],
      [1, 'full', `full, SQNR ${DEFAULT_ANALYSIS_OPTIONS.sqnrRows} rows`],
      [2, 'read', 'raw read (baseline)'],
      [2, 'sqnr-all', 'full, SQNR all rows'],
    ];
    const raw = new Map<number, number>();
    const rawCpu = new Map<number, number>();
    const histogram = new Map<number, Measurement>();
    let fullOnBig: Measurement | undefined;
    let inThreadOnBig: Measurement | undefined;
    for (const [index, mode, name] of plan) {
      const m = inChild(mode, files[index].path);
      if (mode === 'histogram') histogram.set(index, m);
      if (mode === 'full' && index === 0) fullOnBig = m;
      if (mode === 'full-1thread') inThreadOnBig = m;
      const label = mode.startsWith('histogram') ? `${name}, ${m.path}` : name;
      const rate = m.bytes / m.seconds / 1e9;
      const cpuRate = m.bytes / m.cpuSeconds / 1e9;
      if (mode === 'read') {
        raw.set(index, rate);
        rawCpu.set(index, cpuRate);
      }
      const ratio = mode === 'read' ? '' : `${fmt(rate / raw.get(index)!, 2)}${fmt(cpuRate / rawCpu.get(index)!, 2)}`;
      console.log(`${files[index].label.padEnd(10)} ${label.padEnd(20)}${fmt(rate)}${fmt(m.seconds)}${fmt(m.bytes / m.cpuSeconds / 1e9)}${fmt(m.maxRssMiB, 0)}    ${ratio}`);
    }
    const [big, quarter] = [histogram.get(0)!, histogram.get(1)!];
    const bigRate = big.bytes / big.seconds / 1e9;
    const bigRatio = bigRate / raw.get(0)!;
    const cpuRatio = (m: Measurement) => m.bytes / m.cpuSeconds / 1e9 / rawCpu.get(0)!;
    console.log('\n(wall ratios need an idle machine: on a loaded one the read and the scan wait for a core; CPU ratios hold under contention)');
    console.log(`histogram pass on 1 GiB (${big.path}): ${bigRate.toFixed(2)} GB/s wall, ${bigRatio.toFixed(2)}× raw read wall, ${cpuRatio(big).toFixed(2)}× per CPU-second (goal ≥ 0.75×: ${bigRatio >= 0.75 ? 'met' : 'not met'} wall, ${cpuRatio(big) >= 0.75 ? 'met' : 'not met'} CPU)`);
    const full = fullOnBig!;
    const fullRatio = full.bytes / full.seconds / 1e9 / raw.get(0)!;
    console.log(`default full pass on 1 GiB: ${(full.bytes / full.seconds / 1e9).toFixed(2)} GB/s wall, ${fullRatio.toFixed(2)}× raw read wall, ${cpuRatio(full).toFixed(2)}× per CPU-second (goal ≥ 0.5×: ${fullRatio >= 0.5 ? 'met' : 'not met'} wall, ${cpuRatio(full) >= 0.5 ? 'met' : 'not met'} CPU)`);
    const inThread = inThreadOnBig!;
    console.log(`default full pass on 1 GiB with the sample in-thread: ${(inThread.bytes / inThread.seconds / 1e9).toFixed(2)} GB/s wall, ${(inThread.bytes / inThread.seconds / 1e9 / raw.get(0)!).toFixed(2)}× raw read wall, ${cpuRatio(inThread).toFixed(2)}× per CPU-second`);
    const same = (m: Measurement) => (m.digest === FULL_REPORT_SHA256 ? 'unchanged' : `CHANGED (sha256 ${m.digest})`);
    console.log(`1 GiB full report against the one before the sample workers: ${same(full)} with the workers, ${same(inThread)} in-thread`);
    if (full.digest !== FULL_REPORT_SHA256 || inThread.digest !== FULL_REPORT_SHA256) process.exitCode = 1;
    console.log(`load average at the end: ${load()}`);
    const [bigRss, quarterRss] = [big.maxRssMiB - idle.maxRssMiB, quarter.maxRssMiB - idle.maxRssMiB];
    // Two 8 MiB chunks can stay within the idle process's own peak: then there is no ratio to take.
    const rssRatio = quarterRss >= 1 ? `ratio ${(bigRss / quarterRss).toFixed(2)}` : 'both within the idle process\'s peak';
    console.log(`peak RSS above idle, 1 GiB vs 0.25 GiB file: ${bigRss.toFixed(0)} vs ${quarterRss.toFixed(0)} MiB (${rssRatio}; 4× the data)`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--measure') {
  void measure(process.argv[3] as Mode, process.argv[4]).then((m) => process.stdout.write(JSON.stringify(m)));
} else {
  void main();
}

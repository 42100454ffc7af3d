// The full pass's SQNR sample on worker threads (src/checkpoint/sqnr-workers.ts): the same report,
// bit for bit, as in-thread; bounded buffers; a worker that dies or a file that breaks fails the
// analysis with an error naming the file and the tensor, without hanging, and the next one works.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, truncate, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { Rng } from '../../src/mx/index.js';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS, type AnalysisControl } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { encodeHeader } from '../../src/checkpoint/safetensors.js';
import { MAX_IN_FLIGHT, sampleWorkerCount, setSampleWorkers, startSampleWorkers, stopSampleWorkers, takeSampleBytesHighWater } from '../../src/checkpoint/sqnr-workers.js';
import type { AnalysisOptions, CheckpointReport } from '../../src/protocol/checkpoint-report.js';
import { withTempDir } from './temp-dir.js';

const run = promisify(execFile);
const defaultWorkers = sampleWorkerCount();
after(async () => {
  setSampleWorkers(defaultWorkers);
  await stopSampleWorkers();
});

/** Raw little-endian words of `dtype` (BF16/F16 as 16-bit, F32 as 32-bit patterns): weight-like, with zeros, subnormals, NaN and ±Inf in some rows. */
function words(dtype: 'BF16' | 'F16' | 'F32', rows: number, cols: number, seed: number): Uint8Array {
  const rng = new Rng(seed);
  const f32 = new Float32Array(rows * cols).map((_, i) => {
    const row = Math.floor(i / cols);
    if (row % 7 === 3 && i % 97 === 0) return [NaN, Infinity, -Infinity][i % 3]!;
    if (i % 11 === 0) return 0;
    if (i % 13 === 0) return (rng.nextFloat() - 0.5) * 2 ** -130; // subnormal in F32 and BF16 (zero in F16)
    return (rng.nextFloat() - 0.5) * 2 ** ((rng.nextU32() % 16) - 10) * (i % 331 === 0 ? 300 : 1);
  });
  if (dtype === 'F32') return new Uint8Array(f32.buffer);
  const bits = new Uint32Array(f32.buffer);
  if (dtype === 'BF16') return new Uint8Array(Uint16Array.from(bits, (word) => word >>> 16).buffer);
  // F16 through its sign, exponent and top mantissa bits, clamped to F16's range (the patterns matter, not the rounding).
  return new Uint8Array(Uint16Array.from(f32, (x) => {
    if (Number.isNaN(x)) return 0x7e00;
    const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
    const magnitude = Math.abs(x);
    if (magnitude === Infinity || magnitude >= 65504) return sign | 0x7c00;
    if (magnitude < 2 ** -14) return sign | Math.round(magnitude / 2 ** -24);
    const exponent = Math.floor(Math.log2(magnitude));
    return sign | ((exponent + 15) << 10) | Math.floor((magnitude / 2 ** exponent - 1) * 1024);
  }).buffer);
}

const TENSORS = [
  { name: 'a.bf16', dtype: 'BF16', shape: [200, 256] },
  { name: 'b.f32', dtype: 'F32', shape: [90, 384] },
  { name: 'c.f16', dtype: 'F16', shape: [64, 128] },
  { name: 'd.cols96', dtype: 'BF16', shape: [40, 96] }, // the 64-block Hadamard rotation does not apply
  { name: 'e.partial', dtype: 'F32', shape: [33, 100] }, // partial MX blocks
  { name: 'f.wide', dtype: 'BF16', shape: [3, 4096] }, // rows wider than the 2 KiB chunks: read in segments
  { name: 'g.bf16', dtype: 'BF16', shape: [4, 8, 512] },
] as const;

async function writeMixed(path: string): Promise<void> {
  const header = encodeHeader(TENSORS.map((t) => ({ ...t, shape: [...t.shape] })));
  const data = TENSORS.map((t, i) => words(t.dtype, t.shape.slice(0, -1).reduce((a, b) => a * b, 1), t.shape[t.shape.length - 1]!, i + 1));
  await writeFile(path, Buffer.concat([header, ...data]));
}

const OPTIONS: AnalysisOptions = { ...DEFAULT_ANALYSIS_OPTIONS, hadamardBlock: 64, sqnrRows: 24, chunkBytes: 2048 };

async function analyse(path: string, options: AnalysisOptions, control?: AnalysisControl): Promise<Omit<CheckpointReport, 'seconds'>> {
  const checkpoint = await openCheckpoint(path);
  try {
    const { seconds: _, ...report } = await analyseCheckpoint(checkpoint, options, control);
    return report;
  } finally {
    await checkpoint.close();
  }
}

test('the report is the same bits with the SQNR sample on 0, 1 or 2 workers (BF16, F32, F16, NaN/Inf/subnormal rows, partial blocks, wide rows)', { timeout: 60_000 }, async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'mixed.safetensors');
    await writeMixed(path);
    for (const options of [OPTIONS, { ...OPTIONS, sqnrRows: 0 }, { ...OPTIONS, hadamardBlock: 32 as const, chunkBytes: 16 << 20 }]) {
      setSampleWorkers(0);
      const inThread = JSON.stringify(await analyse(path, options));
      for (const workers of [1, 2]) {
        setSampleWorkers(workers);
        await startSampleWorkers();
        takeSampleBytesHighWater();
        const report = JSON.stringify(await analyse(path, options));
        assert.ok(takeSampleBytesHighWater() > 0, `${workers} worker(s): some samples went to a worker`);
        assert.equal(report, inThread, `${workers} worker(s), sqnrRows ${options.sqnrRows}, chunk ${options.chunkBytes}`);
      }
    }
    const report = JSON.parse(JSON.stringify(await analyse(path, OPTIONS))) as CheckpointReport;
    assert.ok(report.tensors.every((t) => t.analysis?.sqnr?.formats !== undefined), 'every tensor has its SQNR and side-by-side formats');
  });
});

test('until a worker has started, analyses quantize their samples themselves: a starting worker delays nothing', { timeout: 60_000 }, async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'mixed.safetensors');
    await writeMixed(path);
    await stopSampleWorkers();
    setSampleWorkers(1);
    takeSampleBytesHighWater();
    const report = JSON.stringify(await analyse(path, OPTIONS)); // the worker is only starting (well over the analysis's few ms)
    assert.equal(takeSampleBytesHighWater(), 0, 'no sample waited for the starting worker');
    await startSampleWorkers();
    assert.equal(JSON.stringify(await analyse(path, OPTIONS)), report);
    assert.ok(takeSampleBytesHighWater() > 0, 'once started, the worker takes samples');
  });
});

test('sampled bytes handed to a worker stay within MAX_IN_FLIGHT chunks, however many rows are sampled', { timeout: 60_000 }, async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'long.safetensors');
    const [rows, cols] = [4096, 256];
    await writeFile(path, Buffer.concat([encodeHeader([{ name: 'long', dtype: 'F32', shape: [rows, cols] }]), words('F32', rows, cols, 7)]));
    const chunkBytes = 8 * cols * 4;
    // A new worker, whose buffers are all this analysis's (each at most a chunk).
    await stopSampleWorkers();
    setSampleWorkers(1);
    await startSampleWorkers();
    // Every row sampled: 512 batches of a chunk each, all on the one worker, which is slower than the read.
    const report = await analyse(path, { ...OPTIONS, sqnrRows: 0, chunkBytes });
    const high = takeSampleBytesHighWater();
    assert.equal(report.tensors[0]!.analysis!.sqnr!.rowsUsed, rows);
    assert.ok(high > 0 && high <= MAX_IN_FLIGHT * chunkBytes, `${high} bytes in flight at most, bound ${MAX_IN_FLIGHT * chunkBytes}`);
  });
});

/** The mixed file's in-thread report, then `body` with one sample worker started; the next analysis must give that report again. */
async function onOneWorker(body: (path: string) => Promise<void>): Promise<void> {
  await withTempDir(async (dir) => {
    const path = join(dir, 'mixed.safetensors');
    await writeMixed(path);
    setSampleWorkers(0);
    const inThread = JSON.stringify(await analyse(path, OPTIONS));
    setSampleWorkers(1);
    await startSampleWorkers();
    await body(path);
    await writeMixed(path);
    assert.equal(JSON.stringify(await analyse(path, OPTIONS)), inThread);
  });
}

/** A progress callback that does `action` on the first progress event only. */
function onFirstProgress(action: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    action();
  };
}

test('a sample worker that dies fails the analysis with an error naming the file and the tensor, no hang; the next analysis starts a new worker', { timeout: 60_000 }, async () => {
  await onOneWorker(async (path) => {
    const onProgress = onFirstProgress(() => void stopSampleWorkers());
    await assert.rejects(analyse(path, OPTIONS, { onProgress }), (error: Error) => {
      assert.match(error.message, /mixed\.safetensors: tensor "a\.bf16": the SQNR sample worker stopped \(it exited with code 1\); analyse again/);
      return true;
    });
  });
});

test('a file truncated while its samples are on a worker fails with the file named, and leaves the worker clean for the next analysis', { timeout: 60_000 }, async () => {
  await onOneWorker(async (path) => {
    const checkpoint = await openCheckpoint(path);
    try {
      const onProgress = onFirstProgress(() => void truncate(path, 2000));
      await assert.rejects(analyseCheckpoint(checkpoint, OPTIONS, { onProgress }), /mixed\.safetensors: file ended at byte \d+, expected \d+ more \(was it truncated while open\?\)/);
    } finally {
      await checkpoint.close();
    }
  });
});

test('the bundled mxscope-inspect starts the bundled worker (dist/checkpoint/sqnr-worker.js) and prints the in-thread report', { timeout: 60_000 }, async () => {
  assert.ok(existsSync('dist/cli/inspect.js') && existsSync('dist/checkpoint/sqnr-worker.js'), 'run npm run build first (npm test does)');
  await withTempDir(async (dir) => {
    const path = join(dir, 'mixed.safetensors');
    await writeMixed(path);
    setSampleWorkers(0);
    const inThread = await analyse(path, { ...DEFAULT_ANALYSIS_OPTIONS, hadamardBlock: 64, sqnrRows: 0 });
    // It must also exit by itself: an idle worker (still starting, for a file this small) keeps no process alive.
    const { stdout } = await run(process.execPath, ['dist/cli/inspect.js', path, '--json', '--hadamard-block', '64', '--sqnr-rows', '0'], { timeout: 30_000 });
    const { seconds: _, ...printed } = JSON.parse(stdout) as CheckpointReport;
    assert.deepEqual(printed, JSON.parse(JSON.stringify(inThread)));
  });
  // Where the bundles look for it (dist/<entry folder>/../checkpoint), it starts and gets ready: a
  // worker that cannot start leaves every analysis in one thread, with the same report, so the
  // comparison above cannot tell.
  const started = `const { Worker } = require('node:worker_threads');
    const worker = new Worker(require('node:path').resolve('dist', 'cli', '..', 'checkpoint', 'sqnr-worker.js'));
    worker.on('message', (m) => { if (m.type === 'ready') { console.log('ready'); process.exit(0); } });
    worker.on('error', (e) => { console.error(e.message); process.exit(1); });`;
  assert.equal((await run(process.execPath, ['-e', started], { timeout: 30_000 })).stdout.trim(), 'ready');
});

test('a bundle whose worker cannot start (missing from the install) analyses in one thread, with the same report', { timeout: 60_000 }, async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'mixed.safetensors');
    await writeMixed(path);
    setSampleWorkers(0);
    const inThread = await analyse(path, { ...DEFAULT_ANALYSIS_OPTIONS, hadamardBlock: 64 });
    await mkdir(join(dir, 'cli'));
    await copyFile('dist/cli/inspect.js', join(dir, 'cli', 'inspect.js')); // no checkpoint/sqnr-worker.js beside it
    const { stdout } = await run(process.execPath, [join(dir, 'cli', 'inspect.js'), path, '--json', '--hadamard-block', '64'], { timeout: 30_000 });
    const { seconds: _, ...printed } = JSON.parse(stdout) as CheckpointReport;
    assert.deepEqual(printed, JSON.parse(JSON.stringify(inThread)));
  });
});

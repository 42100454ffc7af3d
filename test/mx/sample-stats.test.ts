// The checkpoint report's SQNR figures are double-precision sums, and the report must stay the same
// bits (bench/checkpoint.bench.ts checks its SHA-256): the WebAssembly statistics kernels must keep
// the summation order they had, and the SQNR sample's in-place driver (sample-stats-wasm.ts) must
// give what the per-format calls give. The order is written out below in TypeScript, from the
// definition (x, its fake-quantized q, the scale of its block), as a model the kernels must match
// bit for bit: MXFP4 sums each block's scaled squares in four float32 lanes; MXFP8 and NVFP4 sum
// in two double lanes per kernel call; every call covers STATS_CHUNK floats.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createMxStats, fakeQuantMxfp4, fakeQuantMxfp8, fakeQuantNvfp4, mxfp4Stats, mxfp8Stats, nvfp4Stats, quantizeMxfp4, quantizeMxfp8, quantizeNvfp4,
  Rng, sampleStats, type HadamardSize, type MxStats, type SampleStats,
} from '../../src/mx/index.js';
import { setSampleStatsKernel } from '../../src/mx/sample-stats.js';
import { STATS_CHUNK } from '../../src/mx/wasm-stats.js';
import { nastyValues, withBackend } from './parity-helpers.js';

const f32 = Math.fround;

/** Weight-like values (Gaussian, a per-row binade), with the odd zero, subnormal, NaN and Inf. */
function weightLike(n: number, cols: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(rng.nextFloat(), 1e-12);
    values[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.nextFloat()) * 2 ** (((i / cols) | 0) % 8 - 12);
    const kind = rng.nextU32() % 4096;
    if (kind < 40) values[i] = 0;
    else if (kind < 44) values[i] = (kind & 1 ? -1 : 1) * 2 ** -140;
    else if (kind === 44) values[i] = NaN;
    else if (kind === 45) values[i] = -Infinity;
  }
  return values;
}

/** MXFP4 (mxfp4.wat `stats`): per block four float32 lanes of s² and (s − r)², s = |x|·2^−shared, r = |q|·2^−shared; (l0 + l1) + (l2 + l3) in double, × 2^(2·shared), summed per call. */
function mxfp4Sums(values: Float32Array, cols: number): [number, number] {
  const { scales } = withBackend('ts', () => quantizeMxfp4(values, cols));
  const q = values.slice();
  withBackend('ts', () => fakeQuantMxfp4(q, cols));
  let signal = 0;
  let error = 0;
  for (let start = 0; start < values.length; start += STATS_CHUNK) {
    let callSignal = 0;
    let callError = 0;
    for (let block = start; block < Math.min(start + STATS_CHUNK, values.length); block += 32) {
      const byte = scales[block / 32]!;
      if (byte === 255) continue;
      const inverse = 2 ** (127 - byte);
      const s = [0, 0, 0, 0];
      const e = [0, 0, 0, 0];
      for (let i = 0; i < 32; i++) {
        const scaled = f32(Math.abs(values[block + i]!) * inverse);
        const d = f32(scaled - Math.abs(q[block + i]!) * inverse);
        s[i % 4] = f32(s[i % 4]! + f32(scaled * scaled));
        e[i % 4] = f32(e[i % 4]! + f32(d * d));
      }
      const unscale = 2 ** (2 * (byte - 127));
      callSignal += (s[0]! + s[1]! + (s[2]! + s[3]!)) * unscale;
      callError += (e[0]! + e[1]! + (e[2]! + e[3]!)) * unscale;
    }
    signal += callSignal;
    error += callError;
  }
  return [signal, error];
}

/** MXFP8 and NVFP4 (`stats` in mxfp8.wat, nvfp4.wat): per call two double lanes, lane k += x_k² + x_(k+2)² per four elements of finite blocks; the lanes added at the end of the call. */
function pairLaneSums(values: Float32Array, q: Float32Array, blockSize: number, finite: (block: number) => boolean): [number, number] {
  let signal = 0;
  let error = 0;
  for (let start = 0; start < values.length; start += STATS_CHUNK) {
    const lanes = [0, 0, 0, 0];
    for (let i = start; i < Math.min(start + STATS_CHUNK, values.length); i += 4) {
      if (!finite(Math.floor(i / blockSize))) continue;
      const x = Array.from(values.subarray(i, i + 4));
      const d = x.map((v, k) => v - q[i + k]!);
      for (const k of [0, 1]) {
        lanes[k] = lanes[k]! + (x[k]! * x[k]! + x[k + 2]! * x[k + 2]!);
        lanes[k + 2] = lanes[k + 2]! + (d[k]! * d[k]! + d[k + 2]! * d[k + 2]!);
      }
    }
    signal += lanes[0]! + lanes[1]!;
    error += lanes[2]! + lanes[3]!;
  }
  return [signal, error];
}

function mxfp8Sums(values: Float32Array, cols: number): [number, number] {
  const { scales } = withBackend('ts', () => quantizeMxfp8(values, cols, 'e4m3'));
  const q = values.slice();
  withBackend('ts', () => fakeQuantMxfp8(q, cols, 'e4m3'));
  return pairLaneSums(values, q, 32, (block) => scales[block] !== 255);
}

function nvfp4Sums(values: Float32Array, cols: number): [number, number] {
  const { scales } = withBackend('ts', () => quantizeNvfp4(values, cols));
  const q = values.slice();
  withBackend('ts', () => fakeQuantNvfp4(q, cols));
  return pairLaneSums(values, q, 16, (block) => scales[block] !== 0x7f);
}

/** What the statistics must be: the counts of the TypeScript kernels (exact integers), the sums of the model. */
function expected(values: Float32Array, statsOf: (values: Float32Array, stats: MxStats) => void, sums: [number, number]): MxStats {
  const stats = createMxStats();
  withBackend('ts', () => statsOf(values, stats));
  [stats.signalSq, stats.errorSq] = sums;
  return stats;
}

const SHAPES: [number, number][] = [[4096, 5], [96, 300], [2048, 11]];
const DATA: [string, (n: number, cols: number, seed: number) => Float32Array][] = [['nasty', (n, _cols, seed) => nastyValues(n, seed)], ['weight-like', weightLike]];

test('the WebAssembly statistics kernels sum in the order the checkpoint report was made with', () => {
  let seed = 90;
  for (const [cols, rows] of SHAPES) {
    for (const [kind, make] of DATA) {
      const values = make(cols * rows, cols, seed++);
      const where = `${kind}, ${rows}×${cols}`;
      const run = (statsOf: (values: Float32Array, stats: MxStats) => void): MxStats =>
        withBackend('wasm', () => {
          const stats = createMxStats();
          statsOf(values, stats);
          return stats;
        });
      const mxfp4 = (v: Float32Array, stats: MxStats) => mxfp4Stats(v, cols, stats);
      const mxfp8 = (v: Float32Array, stats: MxStats) => mxfp8Stats(v, cols, 'e4m3', stats);
      const nvfp4 = (v: Float32Array, stats: MxStats) => nvfp4Stats(v, cols, stats);
      assert.deepEqual(run(mxfp4), expected(values, mxfp4, mxfp4Sums(values, cols)), `${where}: MXFP4`);
      assert.deepEqual(run(mxfp8), expected(values, mxfp8, mxfp8Sums(values, cols)), `${where}: MXFP8 E4M3`);
      assert.deepEqual(run(nvfp4), expected(values, nvfp4, nvfp4Sums(values, cols)), `${where}: NVFP4`);
      const reached = run(mxfp4);
      assert.ok(reached.saturated > 0 && reached.flushed > 0 && reached.expCounts[255]! > 0 && reached.nonZero < reached.elements - 32 * reached.expCounts[255]!, `${where}: the data reaches saturation, flushing, NaN blocks and zeros`);
    }
  }
});

function createSampleStats(): SampleStats {
  return { plain: createMxStats(), rotated: createMxStats(), nvfp4: createMxStats(), mxfp8: createMxStats() };
}

test('the SQNR sample in one WebAssembly memory gives the per-format calls\' bits, and leaves the batch as it is', () => {
  let seed = 120;
  const cases: [number, number, HadamardSize | null][] = [[4096, 5, 32], [96, 300, 32], [2048, 11, 128], [128, 70, 16], [192, 40, 64], [96, 30, null], [48, 20, 16]];
  for (const [cols, rows, hadamardBlock] of cases) {
    for (const [kind, make] of DATA) {
      const values = make(cols * rows, cols, seed++);
      const before = values.slice();
      const where = `${kind}, ${rows}×${cols}, Hadamard ${hadamardBlock}`;
      const [inPlace, perFormat] = withBackend('wasm', () => {
        const rotation = new Float32Array(values.length);
        const first = createSampleStats();
        sampleStats(values, cols, hadamardBlock, first, rotation);
        // A second batch into the same totals, as a tensor's later batches go.
        sampleStats(values.subarray(0, cols * 3), cols, hadamardBlock, first, rotation);
        setSampleStatsKernel(undefined);
        const second = createSampleStats();
        sampleStats(values, cols, hadamardBlock, second, rotation);
        sampleStats(values.subarray(0, cols * 3), cols, hadamardBlock, second, rotation);
        return [first, second];
      });
      assert.deepEqual(inPlace, perFormat, where);
      assert.deepEqual(values, before, `${where}: the batch is unchanged`);
      assert.equal(perFormat.rotated.elements, hadamardBlock === null ? 0 : values.length + cols * 3, `${where}: the rotated statistics are there, or not`);
    }
  }
  // Shapes the reference refuses are refused the same way, not counted as nothing.
  withBackend('wasm', () => {
    assert.throws(() => sampleStats(new Float32Array(0), 64, 32, createSampleStats(), new Float32Array(0)), /values is empty/);
    assert.throws(() => sampleStats(new Float32Array(96 * 2), 96, 64, createSampleStats(), new Float32Array(96 * 2)), /must be a multiple of blockSize 64/);
  });
});

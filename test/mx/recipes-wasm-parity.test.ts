// The WebAssembly MXFP8 and NVFP4 kernels against the TypeScript reference: codes, scales,
// fake-quant bits and statistics on data that reaches every branch (NaN/Inf blocks, subnormals,
// ±0, grid ties, saturation, NVFP4 block scales that round to 0), rows longer than a chunk, 16×16
// tiles over row counts that do not divide by 16, and views with a byte offset.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createMxStats,
  fakeQuantMxfp8,
  fakeQuantNvfp4,
  quantizeMxfp8,
  quantizeNvfp4,
  Rng,
  SCALE_RULES,
  type MxBackend,
  type MxStats,
} from '../../src/mx/index.js';
import { bitsOf, nastyValues, withBackend } from './parity-helpers.js';

/** Values of a trained layer's scale: per-block magnitudes over 2^±10, a rare outlier, a rare NaN or Inf. */
function layerValues(n: number, seed: number, specials: boolean): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, (_, i) => {
    const u = rng.nextU32();
    if (specials && u % 997 === 0) return [NaN, Infinity, -Infinity][u % 3]!;
    const outlier = u % 211 === 0 ? 300 : 1;
    return (rng.nextFloat() - 0.5) * outlier * 2 ** (((i >> 4) % 21) - 10);
  });
}

function assertSameStats(wasm: MxStats, ts: MxStats, where: string): void {
  for (const key of ['blocks', 'elements', 'saturated', 'flushed', 'nonZero'] as const) assert.equal(wasm[key], ts[key], `${where}: stats.${key}`);
  assert.deepEqual(wasm.expCounts, ts.expCounts, `${where}: scale histogram`);
  for (const key of ['signalSq', 'errorSq'] as const) {
    // Both sum exact double squares; only the order of the additions differs.
    assert.ok(Math.abs(wasm[key] - ts[key]) <= 1e-12 * Math.abs(ts[key]) || wasm[key] === ts[key], `${where}: stats.${key} ${wasm[key]} vs ${ts[key]}`);
  }
}

const INPUTS: [string, (n: number, seed: number) => Float32Array][] = [
  ['nasty', nastyValues],
  ['layer', (n, seed) => layerValues(n, seed, false)],
  ['layer with NaN/Inf', (n, seed) => layerValues(n, seed, true)],
];

test('MXFP8: WebAssembly and TypeScript give identical scales, codes, fake-quant bits and stats (both elements, every scale rule)', () => {
  for (const [kind, make] of INPUTS) {
    for (const [rowLength, rows, seed] of [[32, 300, 1], [256, 24, 2], [32 * 300, 2, 3]] as const) {
      const input = make(rowLength * rows, seed);
      for (const format of ['e4m3', 'e5m2'] as const) {
        for (const scaleRule of SCALE_RULES) {
          const run = (backend: MxBackend) =>
            withBackend(backend, () => {
              const { scales, codes } = quantizeMxfp8(input, rowLength, format, { scaleRule });
              const faked = input.slice();
              const stats = createMxStats();
              fakeQuantMxfp8(faked, rowLength, format, { scaleRule, stats });
              return { scales, codes, faked, stats };
            });
          const ts = run('ts');
          const wasm = run('wasm');
          const where = `${kind} ${format} ${scaleRule} rowLength ${rowLength}`;
          assert.deepEqual(wasm.scales, ts.scales, `${where}: scales`);
          assert.deepEqual(wasm.codes, ts.codes, `${where}: codes`);
          assert.deepEqual(bitsOf(wasm.faked), bitsOf(ts.faked), `${where}: fake-quant bits`);
          assertSameStats(wasm.stats, ts.stats, where);
          if (kind === 'nasty') assert.ok(ts.stats.expCounts[255]! > 0 && ts.stats.flushed > 0, `${where}: the data should hit NaN blocks and flushes`);
        }
      }
    }
  }
});

test('NVFP4: WebAssembly and TypeScript give identical scales, codes, tensor scale, fake-quant bits and stats (1×16 and 16×16)', () => {
  let zeroScales = 0;
  let saturated = 0;
  for (const [kind, make] of INPUTS) {
    for (const [rowLength, rows, seed] of [[16, 600, 4], [48, 37, 5], [256, 40, 6], [16 * 600, 3, 7]] as const) {
      const input = make(rowLength * rows, seed);
      for (const tile2d of [false, true]) {
        const run = (backend: MxBackend) =>
          withBackend(backend, () => {
            const quantized = quantizeNvfp4(input, rowLength, { tile2d });
            const faked = input.slice();
            const stats = createMxStats();
            fakeQuantNvfp4(faked, rowLength, { tile2d, stats });
            return { ...quantized, faked, stats };
          });
        const ts = run('ts');
        const wasm = run('wasm');
        const where = `${kind} ${tile2d ? '16×16' : '1×16'} rowLength ${rowLength} rows ${rows}`;
        assert.deepEqual(wasm.scales, ts.scales, `${where}: scales`);
        assert.deepEqual(wasm.codes, ts.codes, `${where}: codes`);
        assert.equal(wasm.amax, ts.amax, `${where}: amax`);
        assert.equal(wasm.tensorScale, ts.tensorScale, `${where}: tensor scale`);
        assert.deepEqual(bitsOf(wasm.faked), bitsOf(ts.faked), `${where}: fake-quant bits`);
        assertSameStats(wasm.stats, ts.stats, where);
        zeroScales += ts.stats.expCounts[0]!;
        saturated += ts.stats.saturated;
      }
    }
  }
  assert.ok(zeroScales > 0, 'the data should reach blocks whose E4M3 scale rounds to 0');
  assert.ok(saturated > 0, 'the data should reach saturated elements');
});

test('MXFP8 and NVFP4 views into a larger buffer (non-zero byteOffset) quantize like standalone arrays on both paths', () => {
  const buffer = layerValues(32 * 64 + 7, 8, true);
  const view = () => buffer.subarray(3, 3 + 32 * 64);
  for (const backend of ['ts', 'wasm'] as MxBackend[]) {
    withBackend(backend, () => {
      for (const quantize of [(v: Float32Array) => fakeQuantMxfp8(v, 64, 'e4m3'), (v: Float32Array) => fakeQuantNvfp4(v, 64, { tile2d: true })]) {
        const expected = view().slice();
        quantize(expected);
        const copy = buffer.slice();
        quantize(copy.subarray(3, 3 + 32 * 64));
        assert.deepEqual(bitsOf(copy.subarray(3, 3 + 32 * 64)), bitsOf(expected), backend);
        assert.deepEqual(bitsOf(copy.subarray(0, 3)), bitsOf(buffer.subarray(0, 3)), `${backend}: before the view`);
        assert.deepEqual(bitsOf(copy.subarray(3 + 32 * 64)), bitsOf(buffer.subarray(3 + 32 * 64)), `${backend}: after the view`);
      }
    });
  }
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMxStats, fakeQuantMxfp4, quantizeMxfp4, Rng, type MxBackend, type MxStats } from '../../src/mx/index.js';
import { bitsOf, nastyValues, withBackend } from './parity-helpers.js';

test('WebAssembly and TypeScript MXFP4 give identical bits and counts on random data', () => {
  for (const [rowLength, rows, seed] of [[32, 500, 1], [256, 40, 2], [4096, 5, 3], [32 * 300, 2, 4]]) {
    const input = nastyValues(rowLength * rows, seed);
    const run = (backend: MxBackend): { scales: Uint8Array; codes: Uint8Array; faked: Float32Array; stats: MxStats } =>
      withBackend(backend, () => {
        const { scales, codes } = quantizeMxfp4(input, rowLength);
        const faked = input.slice();
        const stats = createMxStats();
        fakeQuantMxfp4(faked, rowLength, { stats });
        return { scales, codes, faked, stats };
      });
    const ts = run('ts');
    const wasm = run('wasm');
    const where = `rowLength ${rowLength}`;
    assert.deepEqual(wasm.scales, ts.scales, `${where}: scales`);
    assert.deepEqual(wasm.codes, ts.codes, `${where}: codes`);
    assert.deepEqual(bitsOf(wasm.faked), bitsOf(ts.faked), `${where}: fake-quant bits`);
    assert.ok(ts.stats.expCounts[255] > 0 && ts.stats.flushed > 0, `${where}: the data should hit NaN blocks and flushes`);
    for (const key of ['blocks', 'elements', 'saturated', 'flushed', 'nonZero'] as const) {
      assert.equal(wasm.stats[key], ts.stats[key], `${where}: stats.${key}`);
    }
    assert.deepEqual(wasm.stats.expCounts, ts.stats.expCounts, `${where}: exponent histogram`);
    for (const key of ['signalSq', 'errorSq'] as const) {
      // The WebAssembly path sums each block's squares in float32 (relative error ~1e-7).
      assert.ok(Math.abs(wasm.stats[key] - ts.stats[key]) <= 1e-5 * ts.stats[key], `${where}: stats.${key}`);
    }
  }
});

test('stochastic rounding and the SR pre-scale give identical bits and leave the Rng at the same place', () => {
  const input = nastyValues(64 * 1500 + 64 * 3, 21); // longer than one WebAssembly chunk
  for (const [rounding, srPrescale] of [['stochastic', false], ['stochastic', true], ['nearest-even', true]] as const) {
    const run = (backend: MxBackend): { faked: Float32Array; next: number } =>
      withBackend(backend, () => {
        const rng = new Rng(77);
        const faked = input.slice();
        fakeQuantMxfp4(faked, 64, { rounding, rng, srPrescale });
        return { faked, next: rng.nextU32() };
      });
    const ts = run('ts');
    const wasm = run('wasm');
    assert.deepEqual(bitsOf(wasm.faked), bitsOf(ts.faked), `${rounding} prescale=${srPrescale}: bits`);
    assert.equal(wasm.next, ts.next, `${rounding} prescale=${srPrescale}: Rng position afterwards`);
  }
});

test('views into a larger buffer (non-zero byteOffset) quantize like standalone arrays on both paths', () => {
  const buffer = nastyValues(32 * 40, 5);
  const view = buffer.subarray(32 * 3 + 1, 32 * 3 + 1 + 32 * 30);
  for (const backend of ['ts', 'wasm'] as MxBackend[]) {
    withBackend(backend, () => {
      const expected = view.slice();
      fakeQuantMxfp4(expected, 32);
      const copy = buffer.slice();
      fakeQuantMxfp4(copy.subarray(32 * 3 + 1, 32 * 3 + 1 + 32 * 30), 32);
      assert.deepEqual(bitsOf(copy.subarray(32 * 3 + 1, 32 * 3 + 1 + 32 * 30)), bitsOf(expected), backend);
      assert.deepEqual(bitsOf(copy.subarray(0, 32 * 3 + 1)), bitsOf(buffer.subarray(0, 32 * 3 + 1)), `${backend}: before the view`);
      assert.deepEqual(quantizeMxfp4(view, 32), quantizeMxfp4(view.slice(), 32), `${backend}: quantize`);
    });
  }
});

test('chunk boundaries do not matter: a long array equals its pieces quantized one by one', () => {
  const input = nastyValues(32 * 1000 + 32 * 7, 9);
  const whole = quantizeMxfp4(input, 32);
  const piece = quantizeMxfp4(input.subarray(32 * 999), 32);
  assert.deepEqual(piece.codes, whole.codes.subarray(32 * 999));
  assert.deepEqual(piece.scales, whole.scales.subarray(999));
});

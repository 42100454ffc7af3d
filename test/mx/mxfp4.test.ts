import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createMxStats, dequantizeMxfp4, fakeQuantMxfp4, packFp4, quantizeMxfp4, resetMxStats, Rng, unpackFp4,
} from '../../src/mx/index.js';

function randomValues(n: number, seed: number, spread = 4): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => (rng.nextFloat() - 0.5) * 2 ** (rng.nextFloat() * 2 * spread - spread));
}

test('bad input gets an error that names the parameter', () => {
  const values = new Float32Array(64);
  assert.throws(() => quantizeMxfp4(values, 0), /rowLength must be a positive integer/);
  assert.throws(() => quantizeMxfp4(values, -32), /rowLength/);
  assert.throws(() => quantizeMxfp4(values, 2.5), /rowLength/);
  assert.throws(() => quantizeMxfp4(new Float32Array(0), 32), /values is empty/);
  assert.throws(() => fakeQuantMxfp4(new Float32Array(33), 32), /not a multiple of rowLength/);
  assert.throws(() => fakeQuantMxfp4(values, 32, { rounding: 'stochastic' }), /needs options.rng/);
  assert.throws(() => dequantizeMxfp4(new Uint8Array(1), new Uint8Array(64), 32), /scales.length 1 should be 2/);
});

test('a block with NaN or Inf gets scale 0xFF and dequantizes to NaN; other blocks are unaffected', () => {
  for (const bad of [NaN, Infinity, -Infinity]) {
    const values = new Float32Array(64).fill(1);
    values[5] = bad;
    const { scales, codes } = quantizeMxfp4(values, 64);
    assert.deepEqual(Array.from(scales), [0xff, 127 - 2]);
    const out = dequantizeMxfp4(scales, codes, 64);
    assert.ok(out.subarray(0, 32).every(Number.isNaN), `block 0 with ${bad}`);
    assert.ok(out.subarray(32).every((v) => v === 1), `block 1 with ${bad}`);
    fakeQuantMxfp4(values, 64);
    assert.deepEqual(Array.from(values), Array.from(out));
  }
});

test('an all-zero block clamps its exponent at -127 (byte 0) and stays +0', () => {
  const values = new Float32Array(32).fill(-0);
  const { scales, codes } = quantizeMxfp4(values, 32);
  assert.equal(scales[0], 0);
  assert.ok(codes.every((c) => c === 0));
  assert.ok(dequantizeMxfp4(scales, codes, 32).every((v) => Object.is(v, 0)));
});

test('partial last blocks get their own scale', () => {
  // Two rows of 35: blocks [0, 32) and [32, 35) in each row.
  const row0 = [...Array(32).fill(1), 100, 0.5, 0.5];
  const row1 = [...Array(32).fill(0.5), 0.5, 3, 3];
  const { scales } = quantizeMxfp4(new Float32Array([...row0, ...row1]), 35);
  // biased byte = floor(log2(amax)) − 2 + 127
  assert.deepEqual(Array.from(scales), [0 - 2 + 127, 6 - 2 + 127, -1 - 2 + 127, 1 - 2 + 127]);
});

test('pack puts element 0 in the low nibble and unpack inverts it, odd counts too', () => {
  assert.deepEqual(Array.from(packFp4(new Uint8Array([1, 2, 15]))), [0x21, 0x0f]);
  const codes = Uint8Array.from({ length: 101 }, (_, i) => (i * 7) & 15);
  assert.deepEqual(unpackFp4(packFp4(codes), codes.length), codes);
  assert.throws(() => unpackFp4(new Uint8Array(2), 5), /count 5 needs 3 bytes/);
});

test('fake-quant stats count blocks, exponents, saturation, flushes and error', () => {
  const values = new Float32Array(64);
  values[0] = 4; // amax of block 0: scale 2^0, so 0.1 flushes and 5.99 rounds to 6 without clipping
  values[1] = 0.1;
  values[2] = -3.75; // rounds to the grid point -4
  values[32] = 7.9; // block 1: scale 2^0 as well; 7.9 saturates to 6
  const stats = createMxStats();
  const original = values.slice();
  fakeQuantMxfp4(values, 64, { stats });
  assert.equal(stats.blocks, 2);
  assert.equal(stats.elements, 64);
  assert.equal(stats.expCounts[127], 2);
  assert.equal(stats.saturated, 1);
  assert.equal(stats.nonZero, 4);
  assert.equal(stats.flushed, 1);
  let signal = 0;
  let error = 0;
  original.forEach((x, i) => { signal += x * x; error += (x - values[i]) ** 2; });
  // Within float32 summation error: the WebAssembly path sums each block in float32.
  assert.ok(Math.abs(stats.signalSq - signal) <= 1e-6 * signal);
  assert.ok(Math.abs(stats.errorSq - error) <= 1e-6 * error);
  resetMxStats(stats);
  assert.equal(stats.blocks, 0);
  assert.equal(stats.expCounts.reduce((a, b) => a + b, 0), 0);
});

test('quantize → dequantize equals the fused fake-quant on random data in every deterministic mode', () => {
  for (const rounding of ['nearest-even', 'nearest-away'] as const) {
    const values = randomValues(96 * 70, 7, 30);
    const { scales, codes } = quantizeMxfp4(values, 96, { rounding });
    const expected = dequantizeMxfp4(scales, codes, 96);
    fakeQuantMxfp4(values, 96, { rounding });
    assert.deepEqual(values, expected);
  }
});

/**
 * Stochastic rounding of a value x between grid points lo < hi is a Bernoulli draw: mean x,
 * variance (hi − x)(x − lo). The mean of n draws must lie within 5 standard errors.
 */
test('stochastic rounding is unbiased', () => {
  const n = 20000;
  // 0.001 is far below its step (0.5): its rounding takes the path for shifts past 31.
  for (const [x, lo, hi] of [[0.3, 0, 0.5], [1.1, 1, 1.5], [2.7, 2, 3], [4.9, 4, 6], [-3.3, -4, -3], [0.001, 0, 0.5]]) {
    const values = new Float32Array(n * 32);
    for (let i = 0; i < values.length; i += 32) { values[i] = x; values[i + 1] = 4; }
    fakeQuantMxfp4(values, 32, { rounding: 'stochastic', rng: new Rng(42) });
    let sum = 0;
    for (let i = 0; i < values.length; i += 32) {
      assert.ok(values[i] === lo || values[i] === hi, `SR of ${x} gave ${values[i]}`);
      sum += values[i];
    }
    const xf = Math.fround(x);
    const bound = 5 * Math.sqrt((hi - xf) * (xf - lo) / n);
    assert.ok(Math.abs(sum / n - xf) < bound, `mean ${sum / n} of SR(${x}) is not within ${bound}`);
  }
});

test('SR pre-scale keeps amax clear of the clip and the fake-quant output unbiased', () => {
  const n = 20000;
  const x = 7.9;
  const values = new Float32Array(n * 32);
  for (let i = 0; i < values.length; i += 32) values[i] = x;
  const stats = createMxStats();
  fakeQuantMxfp4(values, 32, { rounding: 'stochastic', rng: new Rng(3), srPrescale: true, stats });
  assert.equal(stats.saturated, 0);
  let sum = 0;
  for (let i = 0; i < values.length; i += 32) sum += values[i];
  // 3/4·7.9 = 5.925 sits between 4 and 6 (scale 2^0); the output is 4/3 of those.
  const scaled = Math.fround(x * 0.75);
  const bound = (4 / 3) * 5 * Math.sqrt((6 - scaled) * (scaled - 4) / n);
  assert.ok(Math.abs(sum / n - x) < bound + 1e-6, `mean ${sum / n} vs ${x} (bound ${bound})`);
  const plain = new Float32Array(32);
  plain[0] = x;
  fakeQuantMxfp4(plain, 32, { rounding: 'stochastic', rng: new Rng(3) });
  assert.equal(plain[0], 6, 'without the pre-scale 7.9 always ends at the clip, 6');
});

test('the same seed gives the same stochastic rounding; a different seed does not', () => {
  const base = randomValues(32 * 64, 11);
  const run = (seed: number) => { const v = base.slice(); fakeQuantMxfp4(v, 32, { rounding: 'stochastic', rng: new Rng(seed) }); return v; };
  assert.deepEqual(run(5), run(5));
  assert.notDeepEqual(run(5), run(6));
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeFp8, encodeFp8, fakeQuantBf16, fakeQuantFp8, Rng, setMxBackend, type Fp8Format, type MxBackend } from '../../src/mx/index.js';

const FORMATS: [Fp8Format, number][] = [['e4m3', 448], ['e5m2', 57344]];

test('every FP8 code round-trips through decode and encode', () => {
  for (const [format] of FORMATS) {
    for (let code = 0; code < 256; code++) {
      const value = decodeFp8(code, format);
      if (Number.isNaN(value)) assert.ok(Number.isNaN(decodeFp8(encodeFp8(value, format), format)), `${format} NaN code ${code}`);
      else assert.equal(encodeFp8(value, format), code, `${format} code ${code} (${value})`);
    }
  }
});

test('FP8 layouts: E4M3 has no Inf and max 448, E5M2 has Inf and max 57344', () => {
  assert.equal(decodeFp8(0x7e, 'e4m3'), 448);
  assert.ok(Number.isNaN(decodeFp8(0x7f, 'e4m3')));
  assert.equal(decodeFp8(0x01, 'e4m3'), 2 ** -9);
  assert.equal(decodeFp8(0x7b, 'e5m2'), 57344);
  assert.equal(decodeFp8(0x7c, 'e5m2'), Infinity);
  assert.equal(decodeFp8(0x01, 'e5m2'), 2 ** -16);
  assert.ok(Object.is(decodeFp8(0x80, 'e4m3'), -0));
});

/** Finite, non-negative codes in increasing value order. */
function sortedFiniteCodes(format: Fp8Format): number[] {
  const codes: number[] = [];
  for (let code = 0; code < 128; code++) if (Number.isFinite(decodeFp8(code, format))) codes.push(code);
  return codes;
}

test('a tie between neighbouring codes rounds to the even code; one step either side goes to the nearer', () => {
  for (const [format] of FORMATS) {
    const codes = sortedFiniteCodes(format);
    for (let i = 0; i + 1 < codes.length; i++) {
      const lo = decodeFp8(codes[i], format);
      const hi = decodeFp8(codes[i + 1], format);
      const mid = (lo + hi) / 2;
      const even = codes[i] % 2 === 0 ? codes[i] : codes[i + 1];
      for (const sign of [1, -1]) {
        const signBit = sign < 0 ? 0x80 : 0;
        assert.equal(encodeFp8(sign * mid, format), even | signBit, `${format} tie ${sign * mid}`);
        const nudge = (hi - lo) / 1024;
        assert.equal(encodeFp8(sign * (mid - nudge), format), codes[i] | signBit, `${format} below tie ${mid}`);
        assert.equal(encodeFp8(sign * (mid + nudge), format), codes[i + 1] | signBit, `${format} above tie ${mid}`);
      }
    }
  }
});

test('finite values beyond max saturate; NaN stays NaN; Inf is Inf in E5M2 and NaN in E4M3', () => {
  for (const [format, max] of FORMATS) {
    for (const x of [max * 1.01, max * 1.5, max * 100, 3e38]) {
      assert.equal(decodeFp8(encodeFp8(x, format), format), max, `${format} ${x}`);
      assert.equal(decodeFp8(encodeFp8(-x, format), format), -max, `${format} ${-x}`);
    }
    assert.ok(Number.isNaN(decodeFp8(encodeFp8(NaN, format), format)));
  }
  assert.equal(decodeFp8(encodeFp8(-Infinity, 'e5m2'), 'e5m2'), -Infinity);
  assert.ok(Number.isNaN(decodeFp8(encodeFp8(Infinity, 'e4m3'), 'e4m3')));
});

test('per-tensor FP8 fake-quant maps amax onto max and rounds the rest on the FP8 grid', () => {
  for (const [format, max] of FORMATS) {
    const values = new Float32Array([1000, -3, 0.001, 7, 0]);
    // Float32 arithmetic around the FP8 cast, as on hardware.
    const scale = Math.fround(max / 1000);
    const expected = Array.from(values, (x) => Math.fround(decodeFp8(encodeFp8(Math.fround(x * scale), format), format) / scale));
    fakeQuantFp8(values, format, 'tensor');
    assert.deepEqual(Array.from(values), expected);
    // amax lands on max and back, within the float32 rounding of scale and of the division.
    assert.ok(Math.abs(values[0] - 1000) <= 2 * 1000 * 2 ** -24, `${format}: ${values[0]}`);
  }
  assert.throws(() => fakeQuantFp8(new Float32Array(0), 'e4m3', 'tensor'), /empty/);
});

test('per-tensor FP8: WebAssembly and TypeScript give identical bits, NaN and ±Inf included', () => {
  const rng = new Rng(3);
  const bits = Uint32Array.from({ length: 10007 }, (_, i) => (i % 50 === 0 ? rng.nextU32() : 0));
  const input = new Float32Array(bits.buffer);
  for (let i = 0; i < input.length; i++) if (bits[i] === 0) input[i] = (rng.nextFloat() - 0.5) * 2 ** (rng.nextU32() % 40 - 20);
  input[7] = Infinity;
  input[8] = -Infinity;
  input[9] = NaN;
  input[10] = -0;
  for (const [format] of FORMATS) {
    const run = (backend: MxBackend): Uint32Array => {
      setMxBackend(backend);
      try {
        const values = input.slice();
        fakeQuantFp8(values, format, 'tensor');
        return new Uint32Array(values.buffer);
      } finally {
        setMxBackend('auto');
      }
    };
    const ts = run('ts');
    assert.deepEqual(run('wasm'), ts, format);
    assert.equal(ts[7], format === 'e5m2' ? 0x7f800000 : 0x7fc00000, `${format}: +Inf`);
    assert.equal(ts[10], 0x80000000, `${format}: -0 keeps its sign`);
  }
});

test('MXFP8 fake-quant uses a power-of-two block scale and turns NaN blocks into NaN', () => {
  const values = new Float32Array(64);
  values[0] = 300; // floor(log2 300) = 8, E4M3 emax 8: scale 2^0
  values[1] = 300.5;
  values[2] = 1 / 3;
  values[40] = NaN;
  fakeQuantFp8(values, 'e4m3', 'mx', 64);
  assert.equal(values[0], 288); // grid step 32 in [256, 512): 300 → 288
  assert.equal(values[1], 288);
  assert.equal(values[2], Math.fround(decodeFp8(encodeFp8(1 / 3, 'e4m3'), 'e4m3')));
  assert.ok(values.subarray(32).every(Number.isNaN));
  assert.throws(() => fakeQuantFp8(new Float32Array(64), 'e4m3', 'mx'), /needs rowLength/);
});

test('BF16 rounds to nearest even on the 16 dropped bits and keeps NaN', () => {
  const bits = new Uint32Array([0x3f808000, 0x3f818000, 0x3f808001, 0x3f80ffff, 0x7f7fffff, 0x7fc00001, 0x80000000]);
  const values = new Float32Array(bits.buffer);
  fakeQuantBf16(values);
  assert.deepEqual(Array.from(bits, (b) => b.toString(16)), ['3f800000', '3f820000', '3f810000', '3f810000', '7f800000', '7fc00001', '80000000']);
});

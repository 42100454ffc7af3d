import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gemmTs, hadamardInPlace, HadamardRotation, Rng, setMxBackend, TE_WGRAD_SIGNS_16, type HadamardSize, type MxBackend } from '../../src/mx/index.js';

const SIZES: HadamardSize[] = [16, 32, 64, 128, 256];

function random(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => rng.nextFloat() * 2 - 1);
}

function transpose(x: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c];
  return out;
}

test('H·Hᵀ = I for every block size (rows of the identity, rotated along axis 1)', () => {
  for (const n of SIZES) {
    const h = new Float32Array(n * n);
    for (let i = 0; i < n; i++) h[i * n + i] = 1;
    hadamardInPlace(h, n, n, 1, n); // row i is now e_i·H/√n, so h holds H/√n
    const product = new Float32Array(n * n);
    gemmTs(n, n, n, h, false, h, true, product, false);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        assert.ok(Math.abs(product[i * n + j] - (i === j ? 1 : 0)) < 1e-5, `n=${n} (${i},${j}) = ${product[i * n + j]}`);
      }
    }
  }
});

test('axis 0 is axis 1 on the transpose', () => {
  const x = random(64 * 24, 1);
  const signs = new HadamardRotation({ blockSize: 32, mode: 'random', seed: 4 }).signs(64);
  const along0 = x.slice();
  hadamardInPlace(along0, 64, 24, 0, 32, signs);
  const along1 = transpose(x, 64, 24);
  hadamardInPlace(along1, 24, 64, 1, 32, signs);
  assert.deepEqual(along0, transpose(along1, 24, 64));
});

test('rotating both GEMM operands along K with the same signs leaves A·B unchanged', () => {
  const [M, K, N] = [8, 256, 12];
  for (const n of SIZES) {
    const a = random(M * K, 2);
    const b = random(K * N, 3);
    const exact = new Float32Array(M * N);
    gemmTs(M, N, K, a, false, b, false, exact, false);
    const signs = new HadamardRotation({ blockSize: n, mode: 'random', seed: 9 }).signs(K);
    hadamardInPlace(a, M, K, 1, n, signs); // A·D·H
    hadamardInPlace(b, K, N, 0, n, signs); // (D·H)ᵀ·B = Hᵀ·D·B
    const rotated = new Float32Array(M * N);
    gemmTs(M, N, K, a, false, b, false, rotated, false);
    exact.forEach((v, i) => assert.ok(Math.abs(rotated[i] - v) < 1e-4, `n=${n} [${i}] ${rotated[i]} vs ${v}`));
  }
});

test('deterministic rotations repeat; random ones differ per call and reproduce from the seed', () => {
  assert.equal(new HadamardRotation({ blockSize: 16, mode: 'deterministic', seed: 1 }).signs(64), undefined);
  const signed = new HadamardRotation({ blockSize: 32, mode: 'fixed-sign', seed: 1 });
  const first = signed.signs(64);
  assert.equal(signed.signs(64), first, 'the same array every call');
  assert.ok(first && first.some((s) => s === -1) && first.every((s) => s === 1 || s === -1));
  assert.deepEqual(Array.from(first.subarray(32)), Array.from(first.subarray(0, 32)), 'one block vector tiled along the axis');
  assert.deepEqual(new HadamardRotation({ blockSize: 32, mode: 'fixed-sign', seed: 1 }).signs(64), first, 'reproduced from the seed');
  assert.notDeepEqual(new HadamardRotation({ blockSize: 32, mode: 'fixed-sign', seed: 2 }).signs(64), first, 'another seed, other signs');

  const random1 = new HadamardRotation({ blockSize: 16, mode: 'random', seed: 1 });
  const random2 = new HadamardRotation({ blockSize: 16, mode: 'random', seed: 1 });
  const a1 = random1.signs(64);
  const a2 = random1.signs(64);
  assert.notDeepEqual(a1, a2);
  assert.deepEqual(random2.signs(64), a1);
  assert.deepEqual(random2.signs(64), a2);
  assert.notDeepEqual(new HadamardRotation({ blockSize: 16, mode: 'random', seed: 2 }).signs(64), a1);
});

test("fixed-sign H16 uses TransformerEngine's hard-coded vector on every call unless asked to draw from the seed", () => {
  const te = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1];
  assert.deepEqual([...TE_WGRAD_SIGNS_16], te);
  for (const seed of [1, 7]) {
    const rotation = new HadamardRotation({ blockSize: 16, mode: 'fixed-sign', seed });
    assert.deepEqual(Array.from(rotation.signs(48)!), [...te, ...te, ...te]);
  }
  const seeded = new HadamardRotation({ blockSize: 16, mode: 'fixed-sign', seed: 1, seededSigns: true });
  assert.notDeepEqual(Array.from(seeded.signs(16)!), te);
  // Rotating both operands with the fixed signs leaves their product unchanged.
  const a = Float32Array.from({ length: 2 * 32 }, (_, i) => Math.sin(i + 1));
  const b = Float32Array.from({ length: 3 * 32 }, (_, i) => Math.cos(i * 0.7));
  const dot = (x: Float32Array, y: Float32Array, i: number, j: number) => { let s = 0; for (let k = 0; k < 32; k++) s += x[i * 32 + k]! * y[j * 32 + k]!; return s; };
  const before = [dot(a, b, 0, 0), dot(a, b, 1, 2)];
  const signs = new HadamardRotation({ blockSize: 16, mode: 'fixed-sign', seed: 3 }).signs(32);
  hadamardInPlace(a, 2, 32, 1, 16, signs);
  hadamardInPlace(b, 3, 32, 1, 16, signs);
  assert.ok(Math.abs(dot(a, b, 0, 0) - before[0]!) < 1e-5 && Math.abs(dot(a, b, 1, 2) - before[1]!) < 1e-5);
});

test('the WebAssembly and TypeScript transforms give identical bits, both axes, every size', () => {
  const run = (backend: MxBackend, rows: number, cols: number, axis: 0 | 1, n: HadamardSize, signs?: Float32Array): Uint32Array => {
    setMxBackend(backend);
    try {
      const x = random(rows * cols, rows + cols + n);
      hadamardInPlace(x, rows, cols, axis, n, signs);
      return new Uint32Array(x.buffer);
    } finally {
      setMxBackend('auto');
    }
  };
  for (const n of SIZES) {
    for (const [rows, cols, axis] of [[3, 2 * n, 1], [300, n, 1], [2 * n, 12, 0], [n, 6, 0]] as const) {
      const signs = new HadamardRotation({ blockSize: n, mode: 'random', seed: n }).signs(axis === 1 ? cols : rows);
      for (const s of [undefined, signs]) {
        assert.deepEqual(run('wasm', rows, cols, axis, n, s), run('ts', rows, cols, axis, n, s), `n=${n} ${rows}×${cols} axis ${axis} signed=${!!s}`);
      }
    }
  }
});

test('bad shapes are rejected with the parameter named', () => {
  assert.throws(() => hadamardInPlace(new Float32Array(48), 3, 16, 0, 16), /rows \(3\) must be a multiple of blockSize 16/);
  assert.throws(() => hadamardInPlace(new Float32Array(32), 2, 16, 1, 16, new Float32Array(2)), /signs.length 2/);
  assert.throws(() => hadamardInPlace(new Float32Array(32), 2, 15, 1, 16), /values.length/);
  assert.throws(() => hadamardInPlace(new Float32Array(32), 1, 32, 1, 8 as HadamardSize), /blockSize must be one of/);
});

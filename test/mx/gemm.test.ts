import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gemm, Rng, setMxBackend, type MxBackend } from '../../src/mx/index.js';

function random(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => rng.nextFloat() * 2 - 1);
}

/** Textbook triple loop in double precision, straight from the definition. */
function naive(M: number, N: number, K: number, a: Float32Array, transA: boolean, b: Float32Array, transB: boolean): Float64Array {
  const c = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += (transA ? a[k * M + i] : a[i * K + k]) * (transB ? b[j * K + k] : b[k * N + j]);
      c[i * N + j] = sum;
    }
  }
  return c;
}

const SHAPES: [number, number, number][] = [[1, 1, 1], [3, 5, 7], [4, 8, 16], [13, 9, 31], [33, 17, 65], [64, 64, 64], [7, 129, 3]];

for (const backend of ['ts', 'wasm'] as MxBackend[]) {
  test(`gemm (${backend}) matches the naive product for every transpose combination and odd sizes`, () => {
    setMxBackend(backend);
    try {
      let seed = 1;
      for (const [M, N, K] of SHAPES) {
        for (const transA of [false, true]) {
          for (const transB of [false, true]) {
            const a = random(M * K, seed++);
            const b = random(K * N, seed++);
            const start = random(M * N, seed++);
            const expected = naive(M, N, K, a, transA, b, transB);
            const where = `${M}×${N}×${K} transA=${transA} transB=${transB}`;
            const tolerance = 1e-5 * Math.sqrt(K) + 1e-6;
            const c = start.slice();
            gemm(M, N, K, a, transA, b, transB, c);
            c.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) <= tolerance, `${where} [${i}] ${v} vs ${expected[i]}`));
            const acc = start.slice();
            gemm(M, N, K, a, transA, b, transB, acc, true);
            acc.forEach((v, i) => assert.ok(Math.abs(v - start[i] - expected[i]) <= tolerance, `${where} accumulate [${i}]`));
          }
        }
      }
    } finally {
      setMxBackend('auto');
    }
  });
}

test('gemm leaves C beyond M·N untouched and rejects bad sizes', () => {
  const c = new Float32Array(10).fill(7);
  gemm(2, 2, 3, random(6, 1), false, random(6, 2), false, c);
  assert.deepEqual(Array.from(c.subarray(4)), [7, 7, 7, 7, 7, 7]);
  assert.throws(() => gemm(0, 2, 2, new Float32Array(4), false, new Float32Array(4), false, c), /M must be a positive integer/);
  assert.throws(() => gemm(2, 2, 3, new Float32Array(5), false, new Float32Array(6), false, c), /a has 5 elements, needs M·K = 6/);
});

test('the WebAssembly backend loads in Node', () => {
  assert.equal(setMxBackend('auto'), true);
});

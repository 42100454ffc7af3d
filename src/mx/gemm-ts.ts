/** Pure TypeScript GEMM: the fallback where WebAssembly is unavailable (accumulates in double per row). */
import type { GemmKernel } from './gemm.js';

let transposed = new Float32Array(0);

/** C[M×N] (+)= op(A)[M×K] · op(B)[K×N], row-major; A is stored [K×M] when transA, B [N×K] when transB. */
export const gemmTs: GemmKernel = (M, N, K, a, transA, b, transB, c, accumulate) => {
  // Rows of op(B) must be contiguous for the inner loop: transpose a stored [N×K] B once.
  let rowsOfB = b;
  if (transB) {
    if (transposed.length < K * N) transposed = new Float32Array(K * N);
    for (let j = 0; j < N; j++) for (let k = 0; k < K; k++) transposed[k * N + j] = b[j * K + k];
    rowsOfB = transposed;
  }
  const row = new Float64Array(N);
  for (let i = 0; i < M; i++) {
    row.fill(0);
    let k = 0;
    // Four rows of B per pass over the accumulator row: a quarter of the loads and stores of `row`.
    for (; k + 4 <= K; k += 4) {
      const a0 = transA ? a[k * M + i] : a[i * K + k];
      const a1 = transA ? a[(k + 1) * M + i] : a[i * K + k + 1];
      const a2 = transA ? a[(k + 2) * M + i] : a[i * K + k + 2];
      const a3 = transA ? a[(k + 3) * M + i] : a[i * K + k + 3];
      const b0 = k * N;
      for (let j = 0; j < N; j++) {
        row[j] += a0 * rowsOfB[b0 + j] + a1 * rowsOfB[b0 + N + j] + a2 * rowsOfB[b0 + 2 * N + j] + a3 * rowsOfB[b0 + 3 * N + j];
      }
    }
    for (; k < K; k++) {
      const aik = transA ? a[k * M + i] : a[i * K + k];
      for (let j = 0, b0 = k * N; j < N; j++) row[j] += aik * rowsOfB[b0 + j];
    }
    for (let j = 0; j < N; j++) c[i * N + j] = accumulate ? c[i * N + j] + row[j] : row[j];
  }
};

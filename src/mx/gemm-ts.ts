/** Pure TypeScript GEMM: the fallback where WebAssembly is unavailable (accumulates in double per row). */
import type { GemmKernel } from './gemm.js';

/** C[M×N] (+)= op(A)[M×K] · op(B)[K×N], row-major; A is stored [K×M] when transA, B [N×K] when transB. */
export const gemmTs: GemmKernel = (M, N, K, a, transA, b, transB, c, accumulate) => {
  if (!accumulate) c.fill(0, 0, M * N);
  const row = new Float64Array(N);
  for (let i = 0; i < M; i++) {
    row.fill(0);
    for (let k = 0; k < K; k++) {
      const aik = transA ? a[k * M + i] : a[i * K + k];
      if (transB) for (let j = 0; j < N; j++) row[j] += aik * b[j * K + k];
      else for (let j = 0, base = k * N; j < N; j++) row[j] += aik * b[base + j];
    }
    for (let j = 0; j < N; j++) c[i * N + j] += row[j];
  }
};

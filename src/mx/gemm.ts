/** The trainer's GEMM: checks its arguments, then runs the fastest available kernel. */
import { gemmTs } from './gemm-ts.js';

export type GemmKernel = (
  M: number, N: number, K: number,
  a: Float32Array, transA: boolean,
  b: Float32Array, transB: boolean,
  c: Float32Array, accumulate: boolean,
) => void;

let fastKernel: GemmKernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; gemmTs stays the fallback. */
export function setGemmKernel(kernel: GemmKernel | undefined): void {
  fastKernel = kernel;
}

/**
 * Row-major C[M×N] (+)= op(A)[M×K] · op(B)[K×N]; op = transpose when the flag is set
 * (A stored [K×M] when transA, B stored [N×K] when transB).
 */
export function gemm(
  M: number, N: number, K: number,
  a: Float32Array, transA: boolean,
  b: Float32Array, transB: boolean,
  c: Float32Array, accumulate = false,
): void {
  for (const [name, value] of [['M', M], ['N', N], ['K', K]] as const) {
    if (!Number.isInteger(value) || value <= 0) throw new Error(`gemm: ${name} must be a positive integer, got ${value}`);
  }
  if (a.length < M * K) throw new Error(`gemm: a has ${a.length} elements, needs M·K = ${M * K}`);
  if (b.length < K * N) throw new Error(`gemm: b has ${b.length} elements, needs K·N = ${K * N}`);
  if (c.length < M * N) throw new Error(`gemm: c has ${c.length} elements, needs M·N = ${M * N}`);
  (fastKernel ?? gemmTs)(M, N, K, a, transA, b, transB, c, accumulate);
}

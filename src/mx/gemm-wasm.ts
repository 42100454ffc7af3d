/** Drives the WebAssembly SIMD GEMM (src/wasm/gemm.wat): copies operands in, packs, multiplies, copies C out. */
import { WASM_BASE64 } from '../wasm/generated/gemm.js';
import type { GemmKernel } from './gemm.js';
import { align16, tryLoad } from './wasm-arena.js';

interface GemmExports {
  gemm(M: number, N: number, K: number, a: number, transA: number, b: number, transB: number,
    c: number, accumulate: number, ap: number, bp: number): void;
}

/** Bytes 0..63 are the kernel's scratch for partial tiles. */
const FIRST_FREE = 64;

export function loadGemmWasm(): GemmKernel | undefined {
  const arena = tryLoad<GemmExports>(WASM_BASE64);
  if (!arena) return undefined;
  return (M, N, K, a, transA, b, transB, c, accumulate) => {
    const aAt = FIRST_FREE;
    const bAt = align16(aAt + 4 * M * K);
    const cAt = align16(bAt + 4 * K * N);
    const apAt = align16(cAt + 4 * M * N);
    const bpAt = align16(apAt + 4 * Math.ceil(M / 4) * 4 * K);
    arena.ensure(bpAt + 4 * Math.ceil(N / 8) * 8 * K);
    const memory = arena.f32;
    memory.set(a.subarray(0, M * K), aAt >> 2);
    memory.set(b.subarray(0, K * N), bAt >> 2);
    if (accumulate) memory.set(c.subarray(0, M * N), cAt >> 2);
    arena.exports.gemm(M, N, K, aAt, transA ? 1 : 0, bAt, transB ? 1 : 0, cAt, accumulate ? 1 : 0, apAt, bpAt);
    c.set(memory.subarray(cAt >> 2, (cAt >> 2) + M * N));
  };
}

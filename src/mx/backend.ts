/**
 * Which kernels run: 'auto' (WebAssembly SIMD where it loads, else TypeScript), 'ts' or 'wasm'.
 * Both paths give identical MXFP4 bits; tests and benchmarks switch between them here.
 */
import { setGemmKernel } from './gemm.js';
import { loadGemmWasm } from './gemm-wasm.js';

export type MxBackend = 'auto' | 'ts' | 'wasm';

let wasmGemm: ReturnType<typeof loadGemmWasm> | null = null;

function loadedGemm(): ReturnType<typeof loadGemmWasm> {
  if (wasmGemm === null) wasmGemm = loadGemmWasm();
  return wasmGemm;
}

/** Selects the kernels; returns true when WebAssembly is in use afterwards. */
export function setMxBackend(backend: MxBackend): boolean {
  if (backend === 'ts') {
    setGemmKernel(undefined);
    return false;
  }
  const gemm = loadedGemm();
  if (!gemm && backend === 'wasm') throw new Error('setMxBackend: WebAssembly SIMD is not available in this runtime');
  setGemmKernel(gemm);
  return gemm !== undefined;
}

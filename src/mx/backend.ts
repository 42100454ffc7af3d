/**
 * Which kernels run: 'auto' (WebAssembly SIMD where it loads, else TypeScript), 'ts' or 'wasm'.
 * Both paths give identical MXFP4 bits; tests and benchmarks switch between them here.
 */
import { setGemmKernel, type GemmKernel } from './gemm.js';
import { loadGemmWasm } from './gemm-wasm.js';
import { setFp8TensorKernel, type Fp8TensorKernel } from './fp8.js';
import { loadFp8Wasm } from './fp8-wasm.js';
import { setHadamardKernel, type HadamardKernel } from './hadamard.js';
import { loadHadamardWasm } from './hadamard-wasm.js';
import { setMxfp4Kernel, type MxKernel } from './mxfp4.js';
import { loadMxfp4Wasm } from './mxfp4-wasm.js';
import { setResidentScaleKernels, setScaleCountsKernel, setScaleHistogramKernel } from './scale-histogram.js';
import { loadScaleHistogramWasm, type ScaleKernels } from './scale-histogram-wasm.js';

export type MxBackend = 'auto' | 'ts' | 'wasm';

interface WasmKernels {
  gemm: GemmKernel;
  mxfp4: MxKernel;
  hadamard: HadamardKernel;
  fp8: Fp8TensorKernel;
  scale: ScaleKernels;
}
let wasm: WasmKernels | undefined | null = null;

function loadWasm(): WasmKernels | undefined {
  if (wasm === null) {
    const gemm = loadGemmWasm();
    const mxfp4 = loadMxfp4Wasm();
    const hadamard = loadHadamardWasm();
    const fp8 = loadFp8Wasm();
    const scale = loadScaleHistogramWasm();
    wasm = gemm && mxfp4 && hadamard && fp8 && scale ? { gemm, mxfp4, hadamard, fp8, scale } : undefined;
  }
  return wasm;
}

/** Selects the kernels; returns true when WebAssembly is in use afterwards. */
export function setMxBackend(backend: MxBackend): boolean {
  const kernels = backend === 'ts' ? undefined : loadWasm();
  if (!kernels && backend === 'wasm') throw new Error('setMxBackend: WebAssembly SIMD is not available in this runtime');
  setGemmKernel(kernels?.gemm);
  setMxfp4Kernel(kernels?.mxfp4);
  setHadamardKernel(kernels?.hadamard);
  setFp8TensorKernel(kernels?.fp8);
  setScaleHistogramKernel(kernels?.scale.histogram);
  setScaleCountsKernel(kernels?.scale.counts);
  setResidentScaleKernels(kernels?.scale.resident);
  return kernels !== undefined;
}

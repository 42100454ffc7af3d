/**
 * Which kernels run: 'auto' (WebAssembly SIMD where it loads, else TypeScript), 'ts' or 'wasm'.
 * Both paths give identical bits (MXFP4, MXFP8, NVFP4, FP8); tests and benchmarks switch between them
 * here. Nothing is selected on import: until a process calls setMxBackend (once, at start-up) the
 * TypeScript kernels run.
 */
import { setGemmKernel, type GemmKernel } from './gemm.js';
import { loadGemmWasm } from './gemm-wasm.js';
import { setFp8TensorKernel, type Fp8TensorKernel } from './fp8.js';
import { loadFp8Wasm } from './fp8-wasm.js';
import { setHadamardKernel, type HadamardKernel } from './hadamard.js';
import { loadHadamardWasm } from './hadamard-wasm.js';
import { setMxfp4Kernel, type MxKernel } from './mxfp4.js';
import { loadMxfp4Wasm } from './mxfp4-wasm.js';
import { setMxfp8Kernel, type Mxfp8Kernel } from './mxfp8.js';
import { loadMxfp8Wasm } from './mxfp8-wasm.js';
import { setNvfp4Kernel, type Nvfp4Kernel } from './nvfp4.js';
import { loadNvfp4Wasm } from './nvfp4-wasm.js';
import { setResidentScaleKernels, setScaleCountsKernel, setScaleHistogramKernel } from './scale-histogram.js';
import { loadScaleHistogramWasm, type ScaleKernels } from './scale-histogram-wasm.js';
import { setSampleStatsKernel, type SampleStatsKernel } from './sample-stats.js';
import { loadSampleStatsWasm } from './sample-stats-wasm.js';

export type MxBackend = 'auto' | 'ts' | 'wasm';

interface WasmKernels {
  gemm: GemmKernel;
  mxfp4: MxKernel;
  mxfp8: Mxfp8Kernel;
  nvfp4: Nvfp4Kernel;
  hadamard: HadamardKernel;
  fp8: Fp8TensorKernel;
  scale: ScaleKernels;
  sample: SampleStatsKernel;
}
let wasm: WasmKernels | undefined | null = null;
let inUse: 'ts' | 'wasm' = 'ts';

function loadWasm(): WasmKernels | undefined {
  if (wasm === null) {
    const gemm = loadGemmWasm();
    const mxfp4 = loadMxfp4Wasm();
    const mxfp8 = loadMxfp8Wasm();
    const nvfp4 = loadNvfp4Wasm();
    const hadamard = loadHadamardWasm();
    const fp8 = loadFp8Wasm();
    const scale = loadScaleHistogramWasm();
    const sample = loadSampleStatsWasm();
    wasm = gemm && mxfp4 && mxfp8 && nvfp4 && hadamard && fp8 && scale && sample ? { gemm, mxfp4, mxfp8, nvfp4, hadamard, fp8, scale, sample } : undefined;
  }
  return wasm;
}

/** Selects the kernels; returns true when WebAssembly is in use afterwards. */
export function setMxBackend(backend: MxBackend): boolean {
  const kernels = backend === 'ts' ? undefined : loadWasm();
  if (!kernels && backend === 'wasm') throw new Error('setMxBackend: WebAssembly SIMD is not available in this runtime');
  setGemmKernel(kernels?.gemm);
  setMxfp4Kernel(kernels?.mxfp4);
  setMxfp8Kernel(kernels?.mxfp8);
  setNvfp4Kernel(kernels?.nvfp4);
  setHadamardKernel(kernels?.hadamard);
  setFp8TensorKernel(kernels?.fp8);
  setScaleHistogramKernel(kernels?.scale.histogram);
  setScaleCountsKernel(kernels?.scale.counts);
  setResidentScaleKernels(kernels?.scale.resident);
  setSampleStatsKernel(kernels?.sample);
  inUse = kernels ? 'wasm' : 'ts';
  return kernels !== undefined;
}

/** The kernels running now. */
export function mxBackendInUse(): 'ts' | 'wasm' {
  return inUse;
}

/** MX Scope numerics core: MXFP4, NVFP4, MXFP8, FP8, BF16, Hadamard rotations and the trainer's GEMM. Pure, no I/O. */
export { Rng } from './rng.js';
export { E2M1_MAGNITUDES, E2M1_MAX, decodeE2m1, type MxRounding } from './e2m1.js';
export { E8M0_BIAS, E8M0_NAN, decodeE8m0, mxfp4ScaleByte } from './e8m0.js';
export { MX_BLOCK_SIZE } from './layout.js';
export {
  quantizeMxfp4,
  dequantizeMxfp4,
  fakeQuantMxfp4,
  mxfp4Stats,
  type MxQuantizeOptions,
  type MxQuantized,
} from './mxfp4.js';
export { quantizeMxfp8, fakeQuantMxfp8, mxfp8Stats, type Mxfp8Options, type Mxfp8Quantized } from './mxfp8.js';
export { quantizeNvfp4, fakeQuantNvfp4, nvfp4Stats, dequantizeNvfp4, nvfp4TensorScales, nvfp4BlockScaleCode, NVFP4_BLOCK_SIZE, E4M3_NAN_CODE, type Nvfp4Options, type Nvfp4Quantized } from './nvfp4.js';
export { mxScaleByte, checkScaleRule, SCALE_RULES, E2M1_ELEMENT, type ScaleRule, type MxElement } from './scale-rule.js';
export { packFp4, unpackFp4 } from './pack.js';
export { createMxStats, resetMxStats, type MxStats } from './stats.js';
export { rotatedMxfp4Stats, sampleStats, type SampleStats } from './sample-stats.js';
export { fastScaleCounts, fastScaleHistogram, acquireResidentScaleKernels, releaseResidentScaleKernels, type ResidentScaleKernels } from './scale-histogram.js';
export { encodeFp8, decodeFp8, fakeQuantFp8, type Fp8Format } from './fp8.js';
export { fakeQuantBf16 } from './bf16.js';
export { hadamardInPlace, HadamardRotation, TE_WGRAD_SIGNS_16, type HadamardSize, type HadamardRotationOptions, type HadamardMode } from './hadamard.js';
export { gemm } from './gemm.js';
export { gemmTs } from './gemm-ts.js';
// Importing src/mx installs nothing: the TypeScript kernels run until the process selects its
// kernels with setMxBackend('auto') once at start-up (mxscope-train's and mxscope-inspect's main,
// the extension's activate, the unit-test runner's test/start-up.ts). Both give the same bits.
export { mxBackendInUse, setMxBackend, type MxBackend } from './backend.js';

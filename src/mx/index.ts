/** MX Scope numerics core: MXFP4, FP8, BF16, Hadamard rotations and the trainer's GEMM. Pure, no I/O. */
export { Rng } from './rng.js';
export { E2M1_MAGNITUDES, E2M1_MAX, decodeE2m1, type MxRounding } from './e2m1.js';
export { E8M0_BIAS, E8M0_NAN, decodeE8m0, mxfp4ScaleByte } from './e8m0.js';
export { MX_BLOCK_SIZE } from './layout.js';
export {
  quantizeMxfp4,
  dequantizeMxfp4,
  fakeQuantMxfp4,
  type MxQuantizeOptions,
  type MxQuantized,
} from './mxfp4.js';
export { packFp4, unpackFp4 } from './pack.js';
export { createMxStats, resetMxStats, type MxStats } from './stats.js';
export { fastScaleCounts, fastScaleHistogram } from './scale-histogram.js';
export { encodeFp8, decodeFp8, fakeQuantFp8, type Fp8Format } from './fp8.js';
export { fakeQuantBf16 } from './bf16.js';
export { hadamardInPlace, HadamardRotation, type HadamardSize, type HadamardRotationOptions } from './hadamard.js';
export { gemm } from './gemm.js';
export { gemmTs } from './gemm-ts.js';
export { setMxBackend, type MxBackend } from './backend.js';

import { setMxBackend } from './backend.js';
setMxBackend('auto');

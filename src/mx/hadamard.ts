/**
 * Block Walsh–Hadamard rotation. Every length-n segment v along the chosen axis becomes
 * (v ∘ signs_segment) · H / √n (with 1/√n rounded to float32) with H the Sylvester Hadamard matrix (symmetric, H·H = n·I), so the
 * transform is orthonormal. Applying the same signs to both GEMM operands along their reduction
 * axis leaves the product unchanged: (A·D·H)(Hᵀ·D·B) = A·B for D = diag(signs).
 */
import { Rng } from './rng.js';

export type HadamardSize = 16 | 32 | 64 | 128 | 256;
const SIZES: readonly number[] = [16, 32, 64, 128, 256];

/** An accelerated transform for already-checked arguments, or false to leave it to TypeScript. */
export type HadamardKernel = (
  values: Float32Array, rows: number, cols: number, axis: 0 | 1, n: number, signs: Float32Array | undefined, norm: number,
) => boolean;
let fastKernel: HadamardKernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; the TS loops stay the reference. */
export function setHadamardKernel(kernel: HadamardKernel | undefined): void {
  fastKernel = kernel;
}

/** 1/√n rounded to float32 once, so every kernel multiplies by the same number. */
export function hadamardNorm(blockSize: HadamardSize): number {
  return Math.fround(1 / Math.sqrt(blockSize));
}

export function hadamardInPlace(
  values: Float32Array,
  rows: number,
  cols: number,
  axis: 0 | 1,
  blockSize: HadamardSize,
  signs?: Float32Array,
): void {
  if (!SIZES.includes(blockSize)) throw new Error(`hadamardInPlace: blockSize must be one of ${SIZES.join(', ')}, got ${blockSize}`);
  if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows <= 0 || cols <= 0 || rows * cols !== values.length) {
    throw new Error(`hadamardInPlace: rows ${rows} × cols ${cols} must be positive integers matching values.length ${values.length}`);
  }
  if (axis !== 0 && axis !== 1) throw new Error(`hadamardInPlace: axis must be 0 or 1, got ${String(axis)}`);
  const axisLength = axis === 1 ? cols : rows;
  if (axisLength % blockSize !== 0) {
    throw new Error(`hadamardInPlace: the ${axis === 1 ? 'cols' : 'rows'} (${axisLength}) must be a multiple of blockSize ${blockSize}`);
  }
  if (signs && signs.length !== axisLength) {
    throw new Error(`hadamardInPlace: signs.length ${signs.length} must equal the size of axis ${axis} (${axisLength})`);
  }
  const norm = hadamardNorm(blockSize);
  if (fastKernel && fastKernel(values, rows, cols, axis, blockSize, signs, norm)) return;
  if (axis === 1) hadamardRows(values, rows, cols, blockSize, norm, signs);
  else hadamardColumns(values, cols, rows, blockSize, norm, signs);
}

/** Segments are contiguous: butterflies inside each row. */
function hadamardRows(x: Float32Array, rows: number, cols: number, n: number, norm: number, signs: Float32Array | undefined): void {
  for (let row = 0; row < rows; row++) {
    const base = row * cols;
    for (let c = 0; c < cols; c++) x[base + c] *= signs ? signs[c] * norm : norm;
    for (let seg = base; seg < base + cols; seg += n) {
      for (let h = 1; h < n; h <<= 1) {
        for (let i = seg; i < seg + n; i += h << 1) {
          for (let j = i; j < i + h; j++) {
            const a = x[j];
            const b = x[j + h];
            x[j] = a + b;
            x[j + h] = a - b;
          }
        }
      }
    }
  }
}

/** Segments run down columns: butterflies combine whole rows, which keeps memory access contiguous. */
function hadamardColumns(x: Float32Array, cols: number, rows: number, n: number, norm: number, signs: Float32Array | undefined): void {
  for (let r = 0; r < rows; r++) {
    const factor = signs ? signs[r] * norm : norm;
    for (let c = r * cols; c < (r + 1) * cols; c++) x[c] *= factor;
  }
  for (let seg = 0; seg < rows; seg += n) {
    for (let h = 1; h < n; h <<= 1) {
      for (let i = seg; i < seg + n; i += h << 1) {
        for (let j = i; j < i + h; j++) {
          const top = j * cols;
          const bottom = (j + h) * cols;
          for (let c = 0; c < cols; c++) {
            const a = x[top + c];
            const b = x[bottom + c];
            x[top + c] = a + b;
            x[bottom + c] = a - b;
          }
        }
      }
    }
  }
}

/**
 * TransformerEngine's fixed 16-entry sign vector for the Wgrad operands of its NVFP4 recipe
 * (`get_wgrad_sign_vector` in transformer_engine/pytorch/tensor/nvfp4_tensor.py and in its
 * reference quantizer, transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py): random
 * signs, hard-coded, the same on every call. Bit i of 0xD7E8 is set where entry i is −1.
 */
export const TE_WGRAD_SIGNS_16: readonly number[] = Array.from({ length: 16 }, (_, i) => ((0xd7e8 >> i) & 1 ? -1 : 1));

/**
 * 'deterministic': plain H every call. 'fixed-sign': H with ±1 signs fixed once (one vector of the
 * block size, tiled along the axis; for block 16 TransformerEngine's vector unless `seededSigns`).
 * 'random': fresh signs along the whole axis on every call.
 */
export type HadamardMode = 'deterministic' | 'fixed-sign' | 'random';

export interface HadamardRotationOptions {
  blockSize: HadamardSize;
  mode: HadamardMode;
  seed: number;
  /** 'fixed-sign' with block 16: draw the vector from the seed instead of using TransformerEngine's. */
  seededSigns?: boolean;
}

export class HadamardRotation {
  readonly blockSize: HadamardSize;
  readonly mode: HadamardMode;
  /** The fixed sign vector of one block ('fixed-sign' only). */
  readonly blockSigns: Float32Array | undefined;
  private readonly stream: Rng;
  private readonly tiled = new Map<number, Float32Array>();

  constructor(options: HadamardRotationOptions) {
    if (!SIZES.includes(options.blockSize)) {
      throw new Error(`HadamardRotation: blockSize must be one of ${SIZES.join(', ')}, got ${options.blockSize}`);
    }
    if (options.mode !== 'deterministic' && options.mode !== 'fixed-sign' && options.mode !== 'random') {
      throw new Error(`HadamardRotation: mode must be 'deterministic', 'fixed-sign' or 'random', got '${String(options.mode)}'`);
    }
    this.blockSize = options.blockSize;
    this.mode = options.mode;
    this.stream = new Rng(options.seed);
    if (this.mode === 'fixed-sign') {
      this.blockSigns = this.blockSize === 16 && !options.seededSigns
        ? Float32Array.from(TE_WGRAD_SIGNS_16)
        : drawSigns(new Rng(options.seed), this.blockSize);
    }
  }

  /**
   * Signs for an axis of `length`: undefined for a plain deterministic rotation, the fixed block
   * vector tiled along the axis (the same array every call) for 'fixed-sign', and fresh draws from
   * the seeded stream for 'random'.
   */
  signs(length: number): Float32Array | undefined {
    if (this.mode === 'random') return drawSigns(this.stream, length);
    if (this.mode === 'deterministic' || !this.blockSigns) return undefined;
    let signs = this.tiled.get(length);
    if (!signs) {
      signs = new Float32Array(length);
      for (let i = 0; i < length; i++) signs[i] = this.blockSigns[i % this.blockSize]!;
      this.tiled.set(length, signs);
    }
    return signs;
  }
}

function drawSigns(rng: Rng, length: number): Float32Array {
  const signs = new Float32Array(length);
  for (let i = 0; i < length; i += 32) {
    const word = rng.nextU32();
    for (let b = 0; b < 32 && i + b < length; b++) signs[i + b] = (word >>> b) & 1 ? -1 : 1;
  }
  return signs;
}

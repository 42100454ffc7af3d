/**
 * NVFP4: FP4 E2M1 elements in blocks of 16 along each row, one FP8 E4M3 scale per block and one
 * FP32 scale per tensor, as TransformerEngine's pure-Python reference quantizer defines them
 * (docs/numerics.md, "NVFP4", lists each step and every choice the reference leaves open). Every
 * step is one float32 operation rounded to nearest even (Math.fround of a double result, which is
 * the correctly rounded float32 for ×, ÷):
 *
 *   S_enc = 448·6 / amax_tensor (FLT_MAX when that overflows), S_dec = 1 / S_enc
 *   per block: s = E4M3(min(amax_block · (S_enc · ⅙), 448)),  e = 1 / (s · S_dec)  (FLT_MAX on overflow)
 *   (⅙ = float32(1/6), folded into the tensor scale first, as the reference and the kernel do)
 *   per element: code = E2M1(clamp(x · e, −6, 6)), ties to even;  fake-quant = (E2M1 · s) · S_dec
 *
 * With `tile2d` a block is a 16×16 tile (16 rows × 16 columns) sharing one scale (NVIDIA's recipe
 * for weights); scales are still stored per row and 16 columns, each tile's repeated on its rows.
 */
import { decodeE2m1 } from './e2m1.js';
import { decodeFp8, encodeFp8 } from './fp8.js';
import { checkRows } from './layout.js';
import { countElement, type MxStats } from './stats.js';

export const NVFP4_BLOCK_SIZE = 16;
/** The largest E4M3 value times the largest E2M1 value. */
const E4M3_TIMES_E2M1 = 448 * 6;
const FLT_MAX = 3.4028234663852886e38;
/** E4M3's NaN code (sign 0), used as the scale of a block holding NaN or ±Inf. */
export const E4M3_NAN_CODE = 0x7f;

export interface Nvfp4Options {
  /** 16×16 tiles instead of 1×16 blocks (NVIDIA's recipe for weights). Default false. */
  tile2d?: boolean;
}

export interface Nvfp4Quantized {
  /** E4M3 scale code per row and 16-column block (ceil(rowLength/16) per row); tiles repeat theirs per row. */
  scales: Uint8Array;
  /** One E2M1 code per element (bit 3 sign). */
  codes: Uint8Array;
  /** Largest finite |x| of the tensor (float32). */
  amax: number;
  /** The per-tensor decode scale S_dec = float32(1 / S_enc). */
  tensorScale: number;
}

/** 2^(b + 22): its float32 ulp is E2M1's step 2^(b − 1) in binade b = 0 ([0, 2)), 1 ([2, 4)), 2 ([4, 6]). */
const E2M1_MAGIC = [2 ** 22, 2 ** 23, 2 ** 24];
/** E2M1 index of each grid value times 2 (0, 1, 2, 3, 4, 6, 8, 12). */
const INDEX_OF_TWICE = Uint8Array.from([0, 1, 2, 3, 4, 0, 5, 0, 6, 0, 0, 0, 7]);

/**
 * The E2M1 index of a scaled magnitude in [0, 6], nearest with ties to even: adding and subtracting
 * 2^(b + 22) in float32 rounds to the binade's step, ties to even, and the grid value's parity is
 * the code's. These are the reference's thresholds (0.25 → 0, 0.75 → 1, 1.25 → 1, 1.75 → 2,
 * 2.5 → 2, 3.5 → 4, 5 → 4) without a branch per threshold, which random data would mispredict.
 */
function e2m1Index(a: number): number {
  const magic = E2M1_MAGIC[+(a >= 2) + +(a >= 4)]!;
  return INDEX_OF_TWICE[2 * Math.fround(Math.fround(a + magic) - magic)]!;
}

/** Value of each E4M3 scale code (sign 0, 0x7F = NaN); built on first use, after fp8.ts has loaded. */
let E4M3_VALUES: Float64Array | undefined;
const E2M1_SIGNED = Float64Array.from({ length: 16 }, (_, code) => decodeE2m1(code));

/** One call's work, as the TypeScript loop below and an accelerated kernel (src/mx/nvfp4-wasm.ts) take it. */
export interface Nvfp4Job {
  values: Float32Array;
  rowLength: number;
  tile2d: boolean;
  scales?: Uint8Array;
  codes?: Uint8Array;
  writeBack: boolean;
  stats?: MxStats;
}

/** A kernel that handles a job and returns its amax and tensor scale, or undefined to leave it to TypeScript. */
export type Nvfp4Kernel = (job: Nvfp4Job) => { amax: number; tensorScale: number } | undefined;
let fastKernel: Nvfp4Kernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel; the TS path stays the reference. */
export function setNvfp4Kernel(kernel: Nvfp4Kernel | undefined): void {
  fastKernel = kernel;
}

/** The per-tensor encode and decode scales from the tensor's finite amax. */
export function nvfp4TensorScales(amax: number): { encode: number; decode: number } {
  let encode = Math.fround(E4M3_TIMES_E2M1 / amax);
  if (encode > FLT_MAX) encode = Math.fround(FLT_MAX);
  if (encode === 0) encode = 1;
  return { encode, decode: Math.fround(1 / encode) };
}

/** float32(1/6): the reference folds E2M1's reciprocal into the tensor's encode scale, as the kernel does. */
const ONE_SIXTH = Math.fround(1 / 6);

/** What a block's amax is multiplied by before its E4M3 rounding: float32(S_enc · ⅙). */
export function nvfp4BlockFactor(tensorEncode: number): number {
  return Math.fround(tensorEncode * ONE_SIXTH);
}

/** The E4M3 code of a block's scale, given its float32 amax and the tensor's encode scale. */
export function nvfp4BlockScaleCode(blockAmax: number, tensorEncode: number): number {
  let scale = Math.fround(blockAmax * nvfp4BlockFactor(tensorEncode));
  if (scale > 448) scale = 448; // also catches +Inf (the reference clamps to FLT_MAX first, then to 448)
  return encodeFp8(scale, 'e4m3');
}

function finiteAmax(values: Float32Array): number {
  let amax = 0;
  for (let i = 0; i < values.length; i++) {
    const a = Math.abs(values[i]!);
    if (a > amax && a !== Infinity) amax = a;
  }
  return amax;
}

function run(job: Nvfp4Job, caller: string): { amax: number; tensorScale: number } {
  const rows = checkRows(job.values.length, job.rowLength, caller);
  return fastKernel?.(job) ?? runTs(job, rows);
}

function runTs(job: Nvfp4Job, rows: number): { amax: number; tensorScale: number } {
  const { values, rowLength, tile2d, scales, codes, writeBack, stats } = job;
  const perRow = Math.ceil(rowLength / NVFP4_BLOCK_SIZE);
  const amax = finiteAmax(values);
  const tensor = nvfp4TensorScales(amax);
  const tileRows = tile2d ? NVFP4_BLOCK_SIZE : 1;
  for (let rowStart = 0; rowStart < rows; rowStart += tileRows) {
    const rowEnd = Math.min(rowStart + tileRows, rows);
    for (let b = 0; b < perRow; b++) {
      const colStart = b * NVFP4_BLOCK_SIZE;
      const colEnd = Math.min(colStart + NVFP4_BLOCK_SIZE, rowLength);
      let blockAmax = 0;
      let finite = true;
      for (let r = rowStart; r < rowEnd; r++) {
        for (let i = r * rowLength + colStart; i < r * rowLength + colEnd; i++) {
          const a = Math.abs(values[i]!);
          if (!(a <= FLT_MAX)) finite = false; // NaN or ±Inf
          else if (a > blockAmax) blockAmax = a;
        }
      }
      const scaleCode = finite ? nvfp4BlockScaleCode(blockAmax, tensor.encode) : E4M3_NAN_CODE;
      if (stats) {
        stats.expCounts[finite ? scaleCode : 255]!++;
        stats.blocks++;
        stats.elements += (rowEnd - rowStart) * (colEnd - colStart);
      }
      const scale = (E4M3_VALUES ??= Float64Array.from({ length: 128 }, (_, code) => decodeFp8(code, 'e4m3')))[scaleCode]!;
      let encode = Math.fround(1 / Math.fround(scale * tensor.decode));
      if (encode > FLT_MAX) encode = Math.fround(FLT_MAX);
      for (let r = rowStart; r < rowEnd; r++) {
        if (scales) scales[r * perRow + b] = scaleCode;
        for (let i = r * rowLength + colStart; i < r * rowLength + colEnd; i++) {
          if (!finite) {
            if (codes) codes[i] = 0;
            if (writeBack) values[i] = NaN;
            continue;
          }
          const x = values[i]!;
          const scaled = Math.fround(x * encode);
          const magnitude = Math.abs(scaled);
          const index = e2m1Index(magnitude > 6 ? 6 : magnitude);
          const code = index | (scaled < 0 ? 8 : 0);
          if (codes) codes[i] = code;
          if (!writeBack && !stats) continue;
          // E2M1 · E4M3 has at most 6 significant bits: exact in float32; then one rounding.
          const out = Math.fround(E2M1_SIGNED[code]! * scale * tensor.decode);
          if (stats) countElement(stats, x, out, magnitude >= 7); // saturated: rounded past 6 before the clamp
          if (writeBack) values[i] = out;
        }
      }
    }
  }
  return { amax, tensorScale: tensor.decode };
}

export function quantizeNvfp4(values: Float32Array, rowLength: number, options?: Nvfp4Options): Nvfp4Quantized {
  const caller = 'quantizeNvfp4';
  const rows = checkRows(values.length, rowLength, caller);
  const scales = new Uint8Array(rows * Math.ceil(rowLength / NVFP4_BLOCK_SIZE));
  const codes = new Uint8Array(values.length);
  const { amax, tensorScale } = run({ values, rowLength, tile2d: options?.tile2d ?? false, scales, codes, writeBack: false }, caller);
  return { scales, codes, amax, tensorScale };
}

/** In place: values := dequantize(quantize(values)), adding to `stats` (E4M3 codes in expCounts, 255 = NaN) when given. */
export function fakeQuantNvfp4(values: Float32Array, rowLength: number, options?: Nvfp4Options & { stats?: MxStats }): void {
  run({ values, rowLength, tile2d: options?.tile2d ?? false, writeBack: true, stats: options?.stats }, 'fakeQuantNvfp4');
}

/** Adds to `stats` what fakeQuantNvfp4 with the same options would add, and leaves `values` as they are. */
export function nvfp4Stats(values: Float32Array, rowLength: number, stats: MxStats, options?: Nvfp4Options): void {
  run({ values, rowLength, tile2d: options?.tile2d ?? false, writeBack: false, stats }, 'nvfp4Stats');
}

export function dequantizeNvfp4(quantized: Nvfp4Quantized, rowLength: number): Float32Array {
  const { scales, codes, tensorScale } = quantized;
  const rows = checkRows(codes.length, rowLength, 'dequantizeNvfp4');
  const perRow = Math.ceil(rowLength / NVFP4_BLOCK_SIZE);
  if (scales.length !== rows * perRow) throw new Error(`dequantizeNvfp4: scales.length ${scales.length} should be ${rows * perRow} (${rows} rows × ${perRow} blocks)`);
  const out = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++) {
    const row = Math.floor(i / rowLength);
    const scale = decodeFp8(scales[row * perRow + Math.floor((i % rowLength) / NVFP4_BLOCK_SIZE)]!, 'e4m3');
    out[i] = Math.fround(E2M1_SIGNED[codes[i]!]! * scale * tensorScale);
  }
  return out;
}

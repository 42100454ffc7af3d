/** Rounding a magnitude onto a small binary floating-point grid, exactly, in double arithmetic. */
import { pow2 } from './e8m0.js';

/** 2^52: adding and subtracting it rounds a double in [0, 2^52) to an integer, ties to even. */
const RNE_MAGIC = 4503599627370496;

const f64 = new Float64Array(1);
const words = new Int32Array(f64.buffer);
f64[0] = 1;
/** Index of the word holding a double's sign and exponent (1 on little-endian hosts). */
const HIGH = words[1] === 0x3ff00000 ? 1 : 0;

/** floor(log2(x)) for a finite x > 0, read exactly from the double's exponent field. */
export function floorLog2(x: number): number {
  f64[0] = x;
  const field = (words[HIGH] >>> 20) & 0x7ff;
  if (field !== 0) return field - 1023;
  f64[0] = x * 2 ** 64; // subnormal double: scale into the normal range first
  return ((words[HIGH] >>> 20) & 0x7ff) - 1023 - 64;
}

export interface FloatGrid {
  /** Explicit mantissa bits. */
  mantissaBits: number;
  /** Smallest normal exponent (unbiased); below it the grid is uniform (subnormals). */
  minExponent: number;
  /** Largest finite magnitude; larger results saturate to it. */
  max: number;
}

/** Round a finite magnitude to the nearest grid point, ties to even, saturating at `grid.max`. */
export function roundToGrid(magnitude: number, grid: FloatGrid): number {
  if (magnitude === 0) return 0;
  if (magnitude >= 2 * grid.max) return grid.max;
  const belowNormal = floorLog2(magnitude) - grid.minExponent;
  // max(floorLog2, minExponent) with a sign mask: V8 would branch, and mixed magnitudes mispredict.
  const exponent = grid.minExponent + (belowNormal & ~(belowNormal >> 31)) - grid.mantissaBits;
  const rounded = (magnitude * pow2(-exponent) + RNE_MAGIC - RNE_MAGIC) * pow2(exponent);
  return rounded > grid.max ? grid.max : rounded;
}

/** Rounding a magnitude onto a small binary floating-point grid, exactly, in double arithmetic. */
import { pow2 } from './e8m0.js';

/** 2^52: adding and subtracting it rounds a double in [0, 2^52) to an integer, ties to even. */
export const RNE_MAGIC = 4503599627370496;

/** floor(log2(x)) for a finite x > 0, exact (Math.log2 alone can round up just below 2^k). */
export function floorLog2(x: number): number {
  let e = Math.floor(Math.log2(x));
  if (2 ** e > x) e--;
  else if (2 ** (e + 1) <= x) e++;
  return e;
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
  const exponent = Math.max(floorLog2(magnitude), grid.minExponent);
  const quantum = pow2(exponent - grid.mantissaBits);
  const rounded = ((magnitude / quantum + RNE_MAGIC) - RNE_MAGIC) * quantum;
  return rounded > grid.max ? grid.max : rounded;
}

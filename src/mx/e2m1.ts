/**
 * FP4 E2M1 element codec: bit 3 is the sign, bits 0–2 index the magnitudes below.
 * Scaled magnitudes are rounded on this grid; the step is 0.5 below 2, 1 in [2, 4) and 2 in [4, 6].
 */
import type { Rng } from './rng.js';

export const E2M1_MAGNITUDES: readonly number[] = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
export const E2M1_MAX = 6;
export const E2M1_SIGN = 8;

export type MxRounding = 'nearest-even' | 'nearest-away' | 'stochastic';

/** 2^52: adding and subtracting it rounds a double in [0, 2^52) to an integer, ties to even. */
const RNE_MAGIC = 4503599627370496;

/**
 * Grid index 0..8 for a scaled magnitude `v` in [0, 8); 8 means "rounded past 6" and the caller
 * saturates it to 7. `v` is an exact float32 value, so every step below is exact in double.
 */
export function e2m1Index(v: number, rounding: MxRounding, rng: Rng | undefined): number {
  const binade = v < 2 ? 0 : v < 4 ? 1 : 2;
  const t = binade === 0 ? v * 2 : binade === 1 ? v : v * 0.5;
  let q: number;
  if (rounding === 'nearest-even') q = t + RNE_MAGIC - RNE_MAGIC;
  else if (rounding === 'nearest-away') q = Math.floor(t + 0.5);
  else q = Math.floor(t + (rng as Rng).nextFloat());
  return q + 2 * binade;
}

export function decodeE2m1(code: number): number {
  const magnitude = E2M1_MAGNITUDES[code & 7];
  return code & E2M1_SIGN ? -magnitude : magnitude;
}

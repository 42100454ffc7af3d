/**
 * FP4 E2M1 element codec: bit 3 is the sign, bits 0–2 index the magnitudes below.
 * Scaled magnitudes are rounded on this grid; the step is 0.5 below 2, 1 in [2, 4) and 2 in [4, 6].
 */
export const E2M1_MAGNITUDES: readonly number[] = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
export const E2M1_MAX = 6;
export const E2M1_SIGN = 8;

export type MxRounding = 'nearest-even' | 'nearest-away' | 'stochastic';

export function decodeE2m1(code: number): number {
  const magnitude = E2M1_MAGNITUDES[code & 7];
  return code & E2M1_SIGN ? -magnitude : magnitude;
}

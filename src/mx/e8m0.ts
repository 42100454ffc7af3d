/**
 * E8M0 shared scales (OCP MX v1.0): an unbiased exponent in [-127, 127] stored with bias 127;
 * byte 0xFF is NaN and there is no zero.
 */

export const E8M0_NAN = 0xff;
export const E8M0_BIAS = 127;

/** 2^k for |k| ≤ 320 (scales, their inverses, and the shifts of the integer rounding), exact doubles. */
const POW2_RANGE = 320;
const POW2 = new Float64Array(2 * POW2_RANGE + 1);
for (let k = -POW2_RANGE, p = 2 ** -POW2_RANGE; k <= POW2_RANGE; k++, p *= 2) POW2[k + POW2_RANGE] = p;

export function pow2(k: number): number {
  return POW2[k + POW2_RANGE];
}

/** 2^(byte − 127), or NaN for 0xFF. */
export function decodeE8m0(byte: number): number {
  return byte === E8M0_NAN ? NaN : pow2(byte - E8M0_BIAS);
}

/**
 * MXFP4 scale byte for a block whose largest |x| has float32 bit pattern `amaxBits` (sign cleared).
 * floor(log2(amax)) − 2 read exactly from the exponent field: a normal amax with field e gives
 * e − 127 − 2; subnormals and zero would give less than −127 and clamp there (byte 0).
 * Biased, that is max(e − 2, 0); a field of 0xFF (NaN or ±Inf) gives the NaN scale.
 */
export function mxfp4ScaleByte(amaxBits: number): number {
  const field = amaxBits >>> 23;
  if (field === 0xff) return E8M0_NAN;
  return field > 2 ? field - 2 : 0;
}

/**
 * How an MX format picks a block's E8M0 shared exponent from the float32 bits of its amax
 * (docs/numerics.md, "Scale rules"). Integer arithmetic on the bits, no Math.log2:
 *
 * - `floor` (OCP MX v1.0 §6.3): floor(log2 amax) − emax.
 * - `even`: amax first rounded to the element's mantissa width (ties away from zero, on the bits),
 *   then floor; a block whose amax would round up to the next binade gets one exponent more.
 * - `rceil`: ceil(log2(d)) with d = float32(amax / max), the element format's largest value; the
 *   smallest scale at which no element saturates (what a round-up-to-E8M0 conversion computes).
 *
 * All clamp to [−127, 127]; a NaN or ±Inf amax gives the NaN byte 0xFF.
 */
import { E8M0_BIAS, E8M0_NAN } from './e8m0.js';

export type ScaleRule = 'floor' | 'rceil' | 'even';
export const SCALE_RULES: readonly ScaleRule[] = ['floor', 'rceil', 'even'];

/** The element format as the scale rule needs it. */
export interface MxElement {
  /** floor(log2(max)): 2 for E2M1, 8 for E4M3, 15 for E5M2. */
  emax: number;
  /** Explicit mantissa bits: 1, 3, 2. */
  mantissaBits: number;
  /** Largest finite value: 6, 448, 57344. */
  max: number;
}

export const E2M1_ELEMENT: MxElement = { emax: 2, mantissaBits: 1, max: 6 };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function checkScaleRule(rule: unknown, caller: string): ScaleRule {
  if (rule !== 'floor' && rule !== 'rceil' && rule !== 'even') {
    throw new Error(`${caller}: unknown scale rule '${String(rule)}'; use floor, rceil or even`);
  }
  return rule;
}

/** Biased E8M0 byte for a block whose largest |x| has float32 bits `amaxBits` (sign cleared). */
export function mxScaleByte(amaxBits: number, rule: ScaleRule, element: MxElement): number {
  const field = amaxBits >>> 23;
  if (field === 0xff) return E8M0_NAN;
  let unbiased: number;
  if (rule === 'floor') {
    // A subnormal or zero amax (field 0) is below 2^−126 and clamps to −127 like any smaller value.
    unbiased = field - 127 - element.emax;
  } else if (rule === 'even') {
    // Adding half an element ulp to the bits carries into the exponent field exactly when amax's
    // significand rounds (half up) to 2 at the element's precision; the field may reach 255 for
    // amax near the float32 max, which is still a finite scale after subtracting emax.
    const rounded = (amaxBits + (1 << (22 - element.mantissaBits))) >>> 23;
    unbiased = rounded - 127 - element.emax;
  } else {
    u32[0] = amaxBits;
    f32[0] = f32[0]! / element.max; // one float32 division, rounded to nearest even
    const bits = u32[0]!;
    const dField = bits >>> 23;
    const mantissa = bits & 0x7fffff;
    // ceil(log2 d): the exponent, plus one unless d is a power of two. A subnormal d is
    // mantissa·2^−149, so ceil(log2 d) = ceil(log2 mantissa) − 149 (d = 0 clamps to −127 below).
    if (dField !== 0) unbiased = dField - 127 + (mantissa === 0 ? 0 : 1);
    else unbiased = mantissa === 0 ? -E8M0_BIAS : 32 - Math.clz32(mantissa - 1) - 149;
  }
  if (unbiased < -E8M0_BIAS) unbiased = -E8M0_BIAS;
  if (unbiased > E8M0_BIAS) unbiased = E8M0_BIAS;
  return unbiased + E8M0_BIAS;
}

/**
 * Pure TypeScript MXFP4 kernel (OCP MX v1.0 §6.3, exact arithmetic): the reference the WebAssembly
 * kernel must match bit for bit, and the only path for nearest-away, stochastic rounding and the
 * SR pre-scale.
 *
 * It works on the float32 bits with integer arithmetic and no data-dependent branches in the hot
 * loop: V8 compiles Math.min/max and ?: on integers to branches, which random data mispredicts
 * (7× slower), so clamps and selects are written with sign masks: for int32 d, d >> 31 is −1 when
 * d < 0 and 0 otherwise. For an element with exponent field e
 * and significand m (implicit bit included), |x| = m·2^(max(e,1) − 150). In a block with shared
 * exponent s the scaled magnitude |x|/2^s lies in grid binade b = clamp(e − 127 − s, 0, 2), whose
 * E2M1 step is 2^(b−1), so the grid multiple is m / 2^shift with shift = 149 + s + b − max(e,1)
 * (always ≥ 22), rounded as an integer; the code index is that multiple + 2b, saturated at 7.
 */
import { decodeE2m1, type MxRounding } from './e2m1.js';
import { E8M0_BIAS, E8M0_NAN, mxfp4ScaleByte, pow2 } from './e8m0.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { Rng } from './rng.js';
import { E2M1_ELEMENT, mxScaleByte, type ScaleRule } from './scale-rule.js';
import type { MxStats } from './stats.js';

export interface MxKernelJob {
  values: Float32Array;
  rows: number;
  rowLength: number;
  rounding: MxRounding;
  rng: Rng | undefined;
  /** Quantize 3/4·x; the fake-quant output is scaled back by 4/3. */
  prescale: boolean;
  /** How the shared exponent is chosen (src/mx/scale-rule.ts); only `floor` has a WebAssembly kernel. */
  scaleRule: ScaleRule;
  /** Where to write codes and scale bytes (quantize), or null. */
  codes: Uint8Array | null;
  scales: Uint8Array | null;
  /** Overwrite `values` with the dequantized result (fake-quant). */
  writeBack: boolean;
  stats: MxStats | undefined;
}

const PRESCALE = 0.75;
/** 4/3 in float32: the pre-scaled fake-quant output is (exact dequantized value) × this, rounded once. */
const UNSCALE = Math.fround(4 / 3);
/** Signed E2M1 value of every code, −0 for code 8. */
const DECODED = Float64Array.from({ length: 16 }, (_, code) => decodeE2m1(code));
const EVEN = 0;
const AWAY = 1;
const STOCHASTIC = 2;

export function runMxfp4Ts(job: MxKernelJob): void {
  const { values, rows, rowLength, rng, prescale, codes, scales, writeBack, stats, scaleRule } = job;
  const mode = job.rounding === 'nearest-even' ? EVEN : job.rounding === 'nearest-away' ? AWAY : STOCHASTIC;
  // Int32 views and >> shifts keep every intermediate a small integer, which V8 compiles to int32 math.
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  const prescaled = new Float32Array(MX_BLOCK_SIZE);
  const prescaledBits = new Int32Array(prescaled.buffer);
  let saturated = 0;
  let flushed = 0;
  let nonZero = 0;
  let signalSq = 0;
  let errorSq = 0;
  let block = 0;
  for (let row = 0; row < rows; row++) {
    const rowEnd = (row + 1) * rowLength;
    for (let start = row * rowLength; start < rowEnd; start += MX_BLOCK_SIZE, block++) {
      const end = Math.min(start + MX_BLOCK_SIZE, rowEnd);
      // Element i's quantizer input is source[i − base]: the caller's bits, or 3/4 of them.
      let source = bits;
      let base = 0;
      if (prescale) {
        for (let i = start; i < end; i++) prescaled[i - start] = values[i] * PRESCALE;
        source = prescaledBits;
        base = start;
      }
      let amaxBits = 0;
      for (let i = start; i < end; i++) {
        const below = amaxBits - (source[i - base] & 0x7fffffff);
        amaxBits -= below & (below >> 31); // max
      }
      const byte = scaleRule === 'floor' ? mxfp4ScaleByte(amaxBits) : mxScaleByte(amaxBits, scaleRule, E2M1_ELEMENT);
      if (scales) scales[block] = byte;
      if (stats) stats.expCounts[byte]++;
      if (byte === E8M0_NAN) {
        if (codes) codes.fill(0, start, end);
        if (writeBack) values.fill(NaN, start, end);
        // One draw per element whatever the block holds, so every kernel walks the same stream.
        if (mode === STOCHASTIC) for (let i = start; i < end; i++) (rng as Rng).nextU32();
        continue;
      }
      const shared = byte - E8M0_BIAS;
      const scale = pow2(shared);
      const unscale = writeBack && prescale ? UNSCALE : 1;
      for (let i = start; i < end; i++) {
        const xBits = source[i - base];
        const field = (xBits >>> 23) & 0xff;
        const significand = (xBits & 0x7fffff) | ((-field >> 31) & 0x800000); // implicit bit unless subnormal
        const unclamped = field - 127 - shared;
        const atLeast0 = unclamped & ~(unclamped >> 31);
        const binade = 2 + ((atLeast0 - 2) & ((atLeast0 - 2) >> 31));
        const shift = 149 + shared + binade - (field + (((field - 1) >> 31) & 1)); // max(field, 1)
        let multiple: number;
        if (mode === EVEN) {
          const sh = shiftAtMost31(shift);
          multiple = (significand + (1 << (sh - 1)) - 1 + ((significand >> sh) & 1)) >> sh;
        } else if (mode === AWAY) {
          const sh = shiftAtMost31(shift);
          multiple = (significand + (1 << (sh - 1))) >> sh;
        } else {
          // Add 32 random bits just below the grid step, then truncate. For shifts up to 31 keeping
          // the top `shift` of them is the same floor in integers; past that, in exact doubles.
          const random = (rng as Rng).nextU32();
          multiple = shift <= 31
            ? (significand + (random >>> (32 - shift))) >>> shift // the sum can pass 2^31: unsigned
            : Math.floor((significand + random * pow2(shift - 32)) * pow2(-shift)) | 0;
        }
        let index = multiple + 2 * binade;
        const clipped = (7 - index) >> 31; // −1 when the index rounded past 7
        index += clipped;
        // Sign of x, unless |x|/2^s is 0 in float32 (x = ±0, or underflow at ≤ 2^−150): then +0.
        let sign = (xBits >>> 28) & 8 & (-significand >> 31);
        if (shift >= 149 && (shift >= 149 + 24 || significand <= 1 << (shift - 149))) sign = 0;
        const code = index | sign;
        if (codes) codes[i] = code;
        if (writeBack || stats) {
          const out = Math.fround(Math.fround(DECODED[code] * scale) * unscale);
          if (stats) {
            const x = values[i];
            const isNonZero = (-significand >> 31) & 1;
            saturated -= clipped;
            nonZero += isNonZero;
            flushed += isNonZero & ((index - 1) >> 31);
            signalSq += x * x;
            errorSq += (x - out) * (x - out);
          }
          if (writeBack) values[i] = out;
        }
      }
    }
  }
  if (stats) {
    stats.blocks += block;
    stats.elements += values.length;
    stats.saturated += saturated;
    stats.flushed += flushed;
    stats.nonZero += nonZero;
    stats.signalSq += signalSq;
    stats.errorSq += errorSq;
  }
}

/** Shifts past 25 leave 0 whatever the rounding; capping at 31 keeps the int32 arithmetic in range. */
function shiftAtMost31(shift: number): number {
  const over = shift - 31;
  return 31 + (over & (over >> 31));
}

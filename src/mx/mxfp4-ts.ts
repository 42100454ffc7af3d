/**
 * Pure TypeScript MXFP4 kernel (OCP MX v1.0 §6.3, exact arithmetic): the reference the WebAssembly
 * kernel must match bit for bit, and the only path for stochastic rounding and the SR pre-scale.
 */
import { E2M1_MAGNITUDES, E2M1_SIGN, e2m1Index, type MxRounding } from './e2m1.js';
import { E8M0_BIAS, E8M0_NAN, mxfp4ScaleByte, pow2 } from './e8m0.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { Rng } from './rng.js';
import type { MxStats } from './stats.js';

export interface MxKernelJob {
  values: Float32Array;
  rows: number;
  rowLength: number;
  rounding: MxRounding;
  rng: Rng | undefined;
  /** Quantize 3/4·x; the fake-quant output is scaled back by 4/3. */
  prescale: boolean;
  /** Where to write codes and scale bytes (quantize), or null. */
  codes: Uint8Array | null;
  scales: Uint8Array | null;
  /** Overwrite `values` with the dequantized result (fake-quant). */
  writeBack: boolean;
  stats: MxStats | undefined;
}

const PRESCALE = 0.75;
const UNSCALE = 4 / 3;
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function runMxfp4Ts(job: MxKernelJob): void {
  const { values, rows, rowLength, rounding, rng, prescale, codes, scales, writeBack, stats } = job;
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  let block = 0;
  for (let row = 0; row < rows; row++) {
    const rowEnd = (row + 1) * rowLength;
    for (let start = row * rowLength; start < rowEnd; start += MX_BLOCK_SIZE, block++) {
      const end = Math.min(start + MX_BLOCK_SIZE, rowEnd);
      let amaxBits = 0;
      for (let i = start; i < end; i++) {
        const b = bits[i] & 0x7fffffff;
        if (b > amaxBits) amaxBits = b;
      }
      if (prescale && amaxBits < 0x7f800000) {
        f32[0] = f32FromBits(amaxBits) * PRESCALE;
        amaxBits = u32[0];
      }
      const byte = mxfp4ScaleByte(amaxBits);
      if (scales) scales[block] = byte;
      if (stats) {
        stats.expCounts[byte]++;
        stats.blocks++;
        stats.elements += end - start;
      }
      if (byte === E8M0_NAN) {
        if (codes) codes.fill(0, start, end);
        if (writeBack) values.fill(NaN, start, end);
        continue;
      }
      const inverse = pow2(E8M0_BIAS - byte);
      const scale = writeBack && prescale ? pow2(byte - E8M0_BIAS) * UNSCALE : pow2(byte - E8M0_BIAS);
      for (let i = start; i < end; i++) {
        const x = values[i];
        // The float32 product: exact unless it underflows, which decides the sign of a zero.
        const scaled = Math.fround((prescale ? Math.fround(x * PRESCALE) : x) * inverse);
        const magnitude = scaled < 0 ? -scaled : scaled;
        let index = e2m1Index(magnitude, rounding, rng);
        if (index > 7) {
          index = 7;
          if (stats) stats.saturated++;
        }
        const code = scaled < 0 ? index | E2M1_SIGN : index;
        if (codes) codes[i] = code;
        if (writeBack || stats) {
          const q = Math.fround(E2M1_MAGNITUDES[index] * scale);
          const out = code & E2M1_SIGN ? -q : q;
          if (stats && x !== 0) {
            stats.nonZero++;
            if (index === 0) stats.flushed++;
          }
          if (stats) {
            stats.signalSq += x * x;
            stats.errorSq += (x - out) * (x - out);
          }
          if (writeBack) values[i] = out;
        }
      }
    }
  }
}

function f32FromBits(b: number): number {
  u32[0] = b;
  return f32[0];
}

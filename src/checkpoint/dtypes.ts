// The safetensors dtypes: their element sizes (from src/protocol/dtypes.ts, re-exported so the
// engine has one import), and decoders from raw little-endian bytes to float32.
import type { FloatDtype } from '../protocol/dtypes.js';

export { DTYPE_BYTES, FLOAT_DTYPES, isDtype, isFloatDtype, type Dtype, type FloatDtype } from '../protocol/dtypes.js';

/** Value of a minifloat bit pattern with IEEE-style subnormals; `ieeeSpecials` picks the IEEE rules (E5M2, F16) over E4M3FN's. */
function minifloatValue(bits: number, exponentBits: number, mantissaBits: number, ieeeSpecials: boolean): number {
  const sign = bits >> (exponentBits + mantissaBits) ? -1 : 1;
  const exponentField = (bits >> mantissaBits) & ((1 << exponentBits) - 1);
  const mantissa = bits & ((1 << mantissaBits) - 1);
  const bias = (1 << (exponentBits - 1)) - 1;
  const maxExponentField = (1 << exponentBits) - 1;
  if (ieeeSpecials && exponentField === maxExponentField) return mantissa === 0 ? sign * Infinity : NaN;
  // E4M3FN (the `F8_E4M3` of safetensors, torch.float8_e4m3fn): no infinities, only S.1111.111 is NaN.
  if (!ieeeSpecials && exponentField === maxExponentField && mantissa === (1 << mantissaBits) - 1) return NaN;
  if (exponentField === 0) return sign * mantissa * 2 ** (1 - bias - mantissaBits);
  return sign * (1 + mantissa / (1 << mantissaBits)) * 2 ** (exponentField - bias);
}

function lookupTable(size: number, valueOf: (bits: number) => number): Float32Array {
  const table = new Float32Array(size);
  for (let bits = 0; bits < size; bits++) table[bits] = valueOf(bits);
  return table;
}

let f16Table: Float32Array | undefined;
let e4m3Table: Float32Array | undefined;
let e5m2Table: Float32Array | undefined;

/**
 * Decodes `count` elements of `dtype` from `bytes` (little-endian, any alignment) into `out[0..count)`.
 * Lookup tables are built on first use: F16 has only 65 536 patterns, the F8 types 256.
 */
export function decodeInto(dtype: FloatDtype, bytes: Uint8Array, out: Float32Array, count: number): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case 'F32':
      if (bytes.byteOffset % 4 === 0) out.set(new Float32Array(bytes.buffer, bytes.byteOffset, count));
      else for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
      return;
    case 'F64':
      for (let i = 0; i < count; i++) out[i] = view.getFloat64(i * 8, true);
      return;
    case 'BF16': {
      const wide = new Uint32Array(out.buffer, out.byteOffset, count);
      // At an even offset (always, for chunks of a file read here): one 32-bit load per two elements,
      // ~1.3× a 16-bit load per element and ~2.5× two byte loads; an element at a 2-mod-4 offset
      // before the pairs, and an odd one after them, go alone.
      if (count > 0 && bytes.byteOffset % 2 === 0) {
        const halves = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
        const lead = (bytes.byteOffset >>> 1) & 1;
        if (lead === 1) wide[0] = halves[0]! << 16;
        const pairs = new Uint32Array(bytes.buffer, bytes.byteOffset + 2 * lead, (count - lead) >>> 1);
        for (let j = 0, i = lead; j < pairs.length; j++, i += 2) {
          const pair = pairs[j]!;
          wide[i] = pair << 16;
          wide[i + 1] = pair & 0xffff0000;
        }
        if ((count - lead) % 2 === 1) wide[count - 1] = halves[count - 1]! << 16;
      } else {
        for (let i = 0; i < count; i++) wide[i] = (bytes[2 * i] | (bytes[2 * i + 1] << 8)) << 16;
      }
      return;
    }
    case 'F16': {
      const table = (f16Table ??= lookupTable(65536, (bits) => minifloatValue(bits, 5, 10, true)));
      for (let i = 0; i < count; i++) out[i] = table[bytes[2 * i] | (bytes[2 * i + 1] << 8)];
      return;
    }
    case 'F8_E4M3': {
      const table = (e4m3Table ??= lookupTable(256, (bits) => minifloatValue(bits, 4, 3, false)));
      for (let i = 0; i < count; i++) out[i] = table[bytes[i]];
      return;
    }
    case 'F8_E5M2': {
      const table = (e5m2Table ??= lookupTable(256, (bits) => minifloatValue(bits, 5, 2, true)));
      for (let i = 0; i < count; i++) out[i] = table[bytes[i]];
      return;
    }
  }
}

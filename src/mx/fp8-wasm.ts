/** Drives the WebAssembly SIMD per-tensor FP8 fake-quant (src/wasm/fp8.wat) in cache-sized chunks. */
import { WASM_BASE64 } from '../wasm/generated/fp8.js';
import { fp8Grid, type Fp8TensorKernel } from './fp8.js';
import { tryLoad } from './wasm-arena.js';

interface Fp8Exports {
  amax_finite(p: number, count: number): number;
  fake_quant_tensor(p: number, count: number, scale: number, max: number, minNormal: number, magicOffset: number, keepInf: number): void;
}

const CHUNK = 8192;
const DATA = 0;

export function loadFp8Wasm(): Fp8TensorKernel | undefined {
  const arena = tryLoad<Fp8Exports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(DATA + 4 * CHUNK);
  /** Copies `values` to DATA chunk by chunk (zero-padded to whole vectors) and calls `each`. */
  const forEachChunk = (values: Float32Array, each: (offset: number, length: number, padded: number) => void): void => {
    for (let offset = 0; offset < values.length; offset += CHUNK) {
      const length = Math.min(CHUNK, values.length - offset);
      const padded = (length + 3) & ~3;
      arena.f32.set(values.subarray(offset, offset + length), DATA >> 2);
      arena.f32.fill(0, (DATA >> 2) + length, (DATA >> 2) + padded);
      each(offset, length, padded);
    }
  };
  const bits = new Uint32Array(1);
  const asFloat = new Float32Array(bits.buffer);
  return {
    amax(values) {
      let amaxBits = 0;
      forEachChunk(values, (_offset, _length, padded) => {
        amaxBits = Math.max(amaxBits, arena.exports.amax_finite(DATA, padded) >>> 0);
      });
      bits[0] = amaxBits;
      return asFloat[0];
    },
    round(values, format, scale) {
      const grid = fp8Grid(format);
      const minNormal = (grid.minExponent + 127) << 23;
      const magicOffset = (23 - grid.mantissaBits) << 23;
      forEachChunk(values, (offset, length, padded) => {
        arena.exports.fake_quant_tensor(DATA, padded, scale, grid.max, minNormal, magicOffset, grid.hasInfinity ? 1 : 0);
        values.set(arena.f32.subarray(DATA >> 2, (DATA >> 2) + length), offset);
      });
    },
  };
}

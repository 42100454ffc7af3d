/** Drives the WebAssembly SIMD Walsh–Hadamard transform (src/wasm/hadamard.wat), chunk by chunk. */
import { WASM_BASE64 } from '../wasm/generated/hadamard.js';
import type { HadamardKernel } from './hadamard.js';
import { align16, tryLoad } from './wasm-arena.js';

export interface HadamardExports {
  rows(src: number, dst: number, count: number, cols: number, n: number, factors: number): void;
  columns(p: number, cols: number, n: number, factors: number): void;
}

const CHUNK = 16384; // floats of whole rows per call along axis 1
const FACTORS = 0;

export function loadHadamardWasm(): HadamardKernel | undefined {
  const arena = tryLoad<HadamardExports>(WASM_BASE64);
  if (!arena) return undefined;
  return (values, rows, cols, axis, n, signs, norm) => {
    if (axis === 0 && cols % 4 !== 0) return false;
    // Along axis 1 a call takes whole rows; along axis 0 one group of n rows.
    const axisLength = axis === 1 ? cols : rows;
    const data = align16(4 * axisLength);
    const rowsPerCall = axis === 1 ? Math.max(1, Math.floor(CHUNK / cols)) : n;
    arena.ensure(data + 4 * rowsPerCall * cols);
    const memory = arena.f32;
    const factors = memory.subarray(FACTORS, FACTORS + axisLength);
    for (let i = 0; i < axisLength; i++) factors[i] = signs ? signs[i] * norm : norm;
    for (let row = 0; row < rows; row += rowsPerCall) {
      const start = row * cols;
      const length = Math.min(rowsPerCall, rows - row) * cols;
      memory.set(values.subarray(start, start + length), data >> 2);
      if (axis === 1) arena.exports.rows(data, data, length, cols, n, FACTORS);
      else arena.exports.columns(data, cols, n, FACTORS + 4 * row);
      values.set(memory.subarray(data >> 2, (data >> 2) + length), start);
    }
    return true;
  };
}

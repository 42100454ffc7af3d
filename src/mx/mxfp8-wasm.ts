/**
 * Drives the WebAssembly SIMD MXFP8 kernels (src/wasm/mxfp8.wat) on rows whose length is a multiple
 * of 32: quantize, fake-quant and its statistics, every scale rule, both element formats. Other
 * rows go to the TypeScript path. Data streams through a small buffer in cache-sized chunks.
 */
import { WASM_BASE64 } from '../wasm/generated/mxfp8.js';
import { fp8Grid, type Fp8Format } from './fp8.js';
import { floorLog2 } from './float-grid.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { Mxfp8Kernel, Mxfp8Job } from './mxfp8.js';
import type { ScaleRule } from './scale-rule.js';
import type { MxStats } from './stats.js';
import { addElementStats, STATS_CHUNK } from './wasm-stats.js';
import { tryLoad, type WasmArena } from './wasm-arena.js';

export interface Mxfp8Exports {
  scale_bytes(p: number, blocks: number, out: number, rule: number, emax: number, mantissaBits: number, max: number): void;
  fake_quant(p: number, blocks: number, scales: number, low: number, high: number, magicAdd: number, max: number): void;
  stats(p: number, blocks: number, scales: number, low: number, high: number, magicAdd: number, max: number): void;
  quantize(p: number, blocks: number, codes: number, scales: number, low: number, high: number, magicAdd: number, mantissaBits: number, binadeBase: number, maxCode: number): void;
}

const CHUNK = STATS_CHUNK; // stays in L1/L2 between the copy in, the kernels and the copy out
/** The statistics area (wasm-stats.ts) with the scale histogram after it, at HISTOGRAM (see mxfp8.wat). */
const HISTOGRAM = 64;
export const MXFP8_STATS_BYTES = HISTOGRAM + 4 * 256;
const DATA = 2048;
const CODES = DATA + 4 * CHUNK;
const SCALES = CODES + CHUNK;
const END = SCALES + CHUNK / MX_BLOCK_SIZE;
/** The scale_bytes kernel's rule argument (the same numbering as mxfp4.wat). */
export const RULE_CODES: Record<ScaleRule, number> = { floor: 0, even: 1, rceil: 2 };

/** What the kernels need to know of an element format (see the header of mxfp8.wat). */
export interface ElementParams {
  emax: number;
  mantissaBits: number;
  max: number;
  low: number;
  high: number;
  magicAdd: number;
  binadeBase: number;
  maxCode: number;
}

export function elementParams(format: Fp8Format): ElementParams {
  const grid = fp8Grid(format);
  const emax = floorLog2(grid.max);
  const m = grid.mantissaBits;
  // Largest finite code: all exponent and mantissa bits set below NaN (E4M3), or below Inf (E5M2).
  const maxCode = format === 'e4m3' ? 0x7e : 0x7b;
  return {
    emax,
    mantissaBits: m,
    max: grid.max,
    low: (grid.minExponent + 127) << 23,
    high: (emax + 1 + 127) << 23,
    magicAdd: (23 - m) << 23,
    binadeBase: 127 + 23 - m + grid.minExponent,
    maxCode,
  };
}

export function loadMxfp8Wasm(): Mxfp8Kernel | undefined {
  const arena = tryLoad<Mxfp8Exports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(END);
  const params: Record<Fp8Format, ElementParams> = { e4m3: elementParams('e4m3'), e5m2: elementParams('e5m2') };
  return (job) => {
    if (job.rowLength % MX_BLOCK_SIZE !== 0) return false;
    run(arena, job, params[job.format]);
    return true;
  };
}

function run(arena: WasmArena<Mxfp8Exports>, job: Mxfp8Job, f: ElementParams): void {
  const { values, codes, scales, stats, writeBack } = job;
  const kernels = arena.exports;
  const rule = RULE_CODES[job.rule];
  if (stats) arena.u8.fill(0, 0, MXFP8_STATS_BYTES);
  for (let offset = 0; offset < values.length; offset += CHUNK) {
    const length = Math.min(CHUNK, values.length - offset);
    const blocks = length / MX_BLOCK_SIZE;
    arena.f32.set(values.subarray(offset, offset + length), DATA >> 2);
    kernels.scale_bytes(DATA, blocks, SCALES, rule, f.emax, f.mantissaBits, f.max);
    if (scales) scales.set(arena.u8.subarray(SCALES, SCALES + blocks), offset / MX_BLOCK_SIZE);
    if (codes) {
      kernels.quantize(DATA, blocks, CODES, SCALES, f.low, f.high, f.magicAdd, f.mantissaBits, f.binadeBase, f.maxCode);
      codes.set(arena.u8.subarray(CODES, CODES + length), offset);
    }
    if (stats) kernels.stats(DATA, blocks, SCALES, f.low, f.high, f.magicAdd, f.max);
    if (writeBack) {
      kernels.fake_quant(DATA, blocks, SCALES, f.low, f.high, f.magicAdd, f.max);
      values.set(arena.f32.subarray(DATA >> 2, (DATA >> 2) + length), offset);
    }
  }
  if (stats) addMxfp8Stats(arena.buffer, stats, values.length);
}

/** Adds the statistics area (at `area` in `buffer`) of a run of `stats` calls over `elements` floats to `stats`. */
export function addMxfp8Stats(buffer: ArrayBuffer, stats: MxStats, elements: number, area = 0): void {
  addElementStats(buffer, stats, elements / MX_BLOCK_SIZE, elements, area);
  const counts = new Uint32Array(buffer, area + HISTOGRAM, 256);
  for (let byte = 0; byte < 256; byte++) stats.expCounts[byte]! += counts[byte]!;
}

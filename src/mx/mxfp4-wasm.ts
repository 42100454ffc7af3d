/**
 * Drives the WebAssembly SIMD MXFP4 kernels (src/wasm/mxfp4.wat) on rows whose length is a multiple
 * of 32: quantize, fake-quant and its statistics alone (mxfp4Stats: no fake-quant, no write-back)
 * with nearest-even, and fake-quant with stochastic rounding and the SR pre-scale when no statistics
 * are asked for. Every other job goes to the TypeScript path. Data streams through a small buffer
 * in cache-sized chunks, so the memory traffic stays that of one read and one write of the caller's
 * array (one read alone for the statistics).
 */
import { WASM_BASE64 } from '../wasm/generated/mxfp4.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { MxKernel } from './mxfp4.js';
import type { MxKernelJob } from './mxfp4-ts.js';
import type { Rng } from './rng.js';
import type { ScaleRule } from './scale-rule.js';
import type { MxStats } from './stats.js';
import { STATS_CHUNK } from './wasm-stats.js';
import { tryLoad, type WasmArena } from './wasm-arena.js';

export interface MxExports {
  scale_bytes(p: number, blocks: number, out: number, rule: number): void;
  fake_quant(p: number, blocks: number, scales: number): void;
  stats(p: number, blocks: number, scales: number): void;
  fake_quant_sr(p: number, blocks: number, scales: number, random: number): void;
  fill_random(dst: number, count: number, state: number): void;
  scale_in_place(p: number, count: number, factor: number): void;
  quantize(p: number, blocks: number, codes: number, scales: number): void;
}

/** Byte offsets in the module's memory; the statistics layout is documented in mxfp4.wat. */
export const MXFP4_STATS_BYTES = 1056;
const SATURATED = 1024 >> 2;
const FLUSHED = 1028 >> 2;
const NON_ZERO = 1032 >> 2;
const SIGNAL_SQ = 1040 >> 3;
const ERROR_SQ = 1048 >> 3;
const CHUNK = STATS_CHUNK; // stays in L1/L2 between the copy in, the kernel and the copy out
const RNG_STATE = 1536;
const DATA = 2048;
const CODES = DATA + 4 * CHUNK;
const SCALES = CODES + CHUNK;
const RANDOM = SCALES + CHUNK / MX_BLOCK_SIZE;
const END = RANDOM + 4 * CHUNK;
const PRESCALE = 0.75;
/** The scale_bytes kernel's rule argument. */
const RULE_CODES: Record<ScaleRule, number> = { floor: 0, even: 1, rceil: 2 };
const UNSCALE = Math.fround(4 / 3);

export function loadMxfp4Wasm(): MxKernel | undefined {
  const arena = tryLoad<MxExports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(END);
  return (job) => {
    if (job.rowLength % MX_BLOCK_SIZE !== 0 || job.rounding === 'nearest-away') return false;
    // The kernels count statistics only for plain nearest-even (with or without the fake-quant).
    const statsOk = !job.stats || (job.rounding === 'nearest-even' && !job.prescale);
    if ((job.writeBack || job.stats) && !job.codes && statsOk) {
      fakeQuant(arena, job);
      return true;
    }
    if (job.codes && job.scales && !job.writeBack && job.rounding === 'nearest-even' && !job.prescale) {
      quantize(arena, job.values, job.codes, job.scales, RULE_CODES[job.scaleRule]);
      return true;
    }
    return false;
  };
}

/** Copies `values` chunk by chunk to DATA and calls `each` with the chunk's offset, length and block count. */
function forEachChunk(arena: WasmArena<MxExports>, values: Float32Array, each: (offset: number, length: number, blocks: number) => void): void {
  for (let offset = 0; offset < values.length; offset += CHUNK) {
    const length = Math.min(CHUNK, values.length - offset);
    arena.f32.set(values.subarray(offset, offset + length), DATA >> 2);
    each(offset, length, length / MX_BLOCK_SIZE);
  }
}

function fakeQuant(arena: WasmArena<MxExports>, job: MxKernelJob): void {
  const { values, stats, prescale } = job;
  const rng = job.rounding === 'stochastic' ? (job.rng as Rng) : undefined;
  const kernels = arena.exports;
  const words = new Uint32Array(arena.buffer, RNG_STATE, 4);
  if (stats) arena.u8.fill(0, 0, MXFP4_STATS_BYTES);
  if (rng) words.set(rng.saveState());
  forEachChunk(arena, values, (offset, length, blocks) => {
    if (prescale) kernels.scale_in_place(DATA, length, PRESCALE);
    kernels.scale_bytes(DATA, blocks, SCALES, RULE_CODES[job.scaleRule]);
    if (rng) {
      kernels.fill_random(RANDOM, length, RNG_STATE);
      kernels.fake_quant_sr(DATA, blocks, SCALES, RANDOM);
    } else {
      if (stats) kernels.stats(DATA, blocks, SCALES);
      if (job.writeBack) kernels.fake_quant(DATA, blocks, SCALES);
    }
    if (!job.writeBack) return;
    if (prescale) kernels.scale_in_place(DATA, length, UNSCALE);
    values.set(arena.f32.subarray(DATA >> 2, (DATA >> 2) + length), offset);
  });
  if (rng) rng.restoreState(Array.from(words));
  if (stats) addMxfp4Stats(arena.buffer, stats, values.length);
}

function quantize(arena: WasmArena<MxExports>, values: Float32Array, codes: Uint8Array, scales: Uint8Array, rule: number): void {
  forEachChunk(arena, values, (offset, length, blocks) => {
    arena.exports.scale_bytes(DATA, blocks, SCALES, rule);
    arena.exports.quantize(DATA, blocks, CODES, SCALES);
    codes.set(arena.u8.subarray(CODES, CODES + length), offset);
    scales.set(arena.u8.subarray(SCALES, SCALES + blocks), offset / MX_BLOCK_SIZE);
  });
}

/** Adds the statistics area (at `area` in `buffer`) of a run of `stats` calls over `elements` floats to `stats`. */
export function addMxfp4Stats(buffer: ArrayBuffer, stats: MxStats, elements: number, area = 0): void {
  const counts = new Uint32Array(buffer, area, MXFP4_STATS_BYTES >> 2);
  const sums = new Float64Array(buffer, area, MXFP4_STATS_BYTES >> 3);
  for (let byte = 0; byte < 256; byte++) stats.expCounts[byte] += counts[byte];
  stats.blocks += elements / MX_BLOCK_SIZE;
  stats.elements += elements;
  stats.saturated += counts[SATURATED];
  stats.flushed += counts[FLUSHED];
  stats.nonZero += counts[NON_ZERO];
  stats.signalSq += sums[SIGNAL_SQ];
  stats.errorSq += sums[ERROR_SQ];
}

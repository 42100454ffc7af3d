/**
 * Drives the WebAssembly SIMD NVFP4 kernels (src/wasm/nvfp4.wat) on rows whose length is a multiple
 * of 16, 1×16 blocks and 16×16 tiles: quantize, fake-quant and its statistics. Other rows go to the
 * TypeScript path. Two passes over the data in cache-sized chunks: the blocks' amax (whose finite
 * maximum is the tensor's amax, known only after the whole tensor), then scales and elements.
 */
import { WASM_BASE64 } from '../wasm/generated/nvfp4.js';
import { decodeFp8 } from './fp8.js';
import { E4M3_NAN_CODE, NVFP4_BLOCK_SIZE, nvfp4BlockFactor, nvfp4TensorScales, type Nvfp4Job, type Nvfp4Kernel } from './nvfp4.js';
import type { MxStats } from './stats.js';
import { addElementStats, ELEMENT_STATS_BYTES, STATS_CHUNK } from './wasm-stats.js';
import { tryLoad, type WasmArena } from './wasm-arena.js';

export interface Nvfp4Exports {
  block_amax(p: number, blocks: number, out: number): number;
  block_scales(amax: number, blocks: number, out: number, encSixth: number): void;
  fake_quant(p: number, blocks: number, scales: number, decode: number): void;
  stats(p: number, blocks: number, scales: number, decode: number): void;
  quantize(p: number, blocks: number, codes: number, scales: number, decode: number): void;
}

const E4M3_TABLE = 64;
const CHUNK = STATS_CHUNK; // stays in L1/L2 between the copy in, the kernels and the copy out
const CHUNK_BLOCKS = CHUNK / NVFP4_BLOCK_SIZE;
const DATA = 1024;
const CODES = DATA + 4 * CHUNK;
const AMAX = CODES + CHUNK;
const SCALES = AMAX + 4 * CHUNK_BLOCKS;
const END = SCALES + CHUNK_BLOCKS;

export function loadNvfp4Wasm(): Nvfp4Kernel | undefined {
  const arena = tryLoad<Nvfp4Exports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(END);
  writeE4m3Table(arena.f32);
  /** Every block's amax bits (one u32 per 16 floats), kept between calls and grown on demand. */
  let amaxBits = new Uint32Array(0);
  let scaleCodes = new Uint8Array(0);
  return (job) => {
    if (job.rowLength % NVFP4_BLOCK_SIZE !== 0) return undefined;
    const blocks = job.values.length / NVFP4_BLOCK_SIZE;
    if (amaxBits.length < blocks) {
      amaxBits = new Uint32Array(blocks);
      scaleCodes = new Uint8Array(blocks);
    }
    const amax = blockAmaxes(arena, job.values, amaxBits);
    if (job.tile2d) mergeTiles(amaxBits, job.values.length / job.rowLength, job.rowLength / NVFP4_BLOCK_SIZE);
    const tensor = nvfp4TensorScales(amax);
    const scales = job.scales ?? scaleCodes;
    quantizeChunks(arena, job, amaxBits, scales, nvfp4BlockFactor(tensor.encode), tensor.decode);
    if (job.stats) countBlocks(job.values.length / job.rowLength, job.rowLength, job.tile2d, scales, job.stats);
    return { amax, tensorScale: tensor.decode };
  };
}

/** The value of every E4M3 code where the kernels read it (64 bytes after the statistics area at `area`; `memory` a float view of the module's memory). */
export function writeE4m3Table(memory: Float32Array, area = 0): void {
  memory.set((e4m3Values ??= Float32Array.from({ length: 128 }, (_, code) => decodeFp8(code, 'e4m3'))), (area + E4M3_TABLE) >> 2);
}
let e4m3Values: Float32Array | undefined;

/** Writes each block's amax bits to `out` and returns the tensor's finite amax. */
function blockAmaxes(arena: WasmArena<Nvfp4Exports>, values: Float32Array, out: Uint32Array): number {
  let finiteBits = 0;
  for (let offset = 0; offset < values.length; offset += CHUNK) {
    const length = Math.min(CHUNK, values.length - offset);
    arena.f32.set(values.subarray(offset, offset + length), DATA >> 2);
    const blocks = length / NVFP4_BLOCK_SIZE;
    finiteBits = Math.max(finiteBits, arena.exports.block_amax(DATA, blocks, AMAX) >>> 0);
    out.set(new Uint32Array(arena.buffer, AMAX, blocks), offset / NVFP4_BLOCK_SIZE);
  }
  return new Float32Array(Uint32Array.of(finiteBits).buffer)[0]!;
}

/** 16×16 tiles: every block of a tile gets the tile's amax (the largest bits, NaN above all). */
function mergeTiles(amaxBits: Uint32Array, rows: number, perRow: number): void {
  for (let rowStart = 0; rowStart < rows; rowStart += NVFP4_BLOCK_SIZE) {
    const rowEnd = Math.min(rowStart + NVFP4_BLOCK_SIZE, rows);
    for (let b = 0; b < perRow; b++) {
      let tile = 0;
      for (let r = rowStart; r < rowEnd; r++) tile = Math.max(tile, amaxBits[r * perRow + b]!);
      for (let r = rowStart; r < rowEnd; r++) amaxBits[r * perRow + b] = tile;
    }
  }
}

function quantizeChunks(arena: WasmArena<Nvfp4Exports>, job: Nvfp4Job, amaxBits: Uint32Array, scales: Uint8Array, encSixth: number, decode: number): void {
  const { values, codes, stats, writeBack } = job;
  const kernels = arena.exports;
  if (stats) arena.u8.fill(0, 0, ELEMENT_STATS_BYTES);
  for (let offset = 0; offset < values.length; offset += CHUNK) {
    const length = Math.min(CHUNK, values.length - offset);
    const first = offset / NVFP4_BLOCK_SIZE;
    const blocks = length / NVFP4_BLOCK_SIZE;
    arena.f32.set(values.subarray(offset, offset + length), DATA >> 2);
    new Uint32Array(arena.buffer, AMAX, blocks).set(amaxBits.subarray(first, first + blocks));
    kernels.block_scales(AMAX, blocks, SCALES, encSixth);
    scales.set(arena.u8.subarray(SCALES, SCALES + blocks), first);
    if (codes) {
      kernels.quantize(DATA, blocks, CODES, SCALES, decode);
      codes.set(arena.u8.subarray(CODES, CODES + length), offset);
    }
    if (stats) kernels.stats(DATA, blocks, SCALES, decode);
    if (writeBack) {
      kernels.fake_quant(DATA, blocks, SCALES, decode);
      values.set(arena.f32.subarray(DATA >> 2, (DATA >> 2) + length), offset);
    }
  }
  if (stats) addElementStats(arena.buffer, stats, 0, 0);
}

/** The scale histogram, blocks and elements, counted once per block or per 16×16 tile as the TypeScript path does. */
export function countBlocks(rows: number, rowLength: number, tile2d: boolean, scales: Uint8Array, stats: MxStats): void {
  const perRow = rowLength / NVFP4_BLOCK_SIZE;
  const tileRows = tile2d ? NVFP4_BLOCK_SIZE : 1;
  // Read once: an imported binding read per block is a getter call where the module loads as CommonJS (tsx).
  const nanCode = E4M3_NAN_CODE;
  const counts = stats.expCounts;
  for (let rowStart = 0; rowStart < rows; rowStart += tileRows) {
    const height = Math.min(tileRows, rows - rowStart);
    for (let b = 0; b < perRow; b++) {
      const code = scales[rowStart * perRow + b]!;
      counts[code === nanCode ? 255 : code]!++;
    }
    stats.blocks += perRow;
    stats.elements += height * rowLength;
  }
}

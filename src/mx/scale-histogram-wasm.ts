/**
 * Drives the WebAssembly SIMD scale histogram and the full pass's saturation/flush counts
 * (src/wasm/scale-histogram.wat). Words that lie in the module's own memory (the resident kernels'
 * chunk buffers, which a checkpoint read fills directly) are scanned in place; any others are
 * copied in, in pieces of at most PIECE_BYTES (whole rows, or whole-block stretches of a longer
 * row), so memory stays fixed whatever the tensor size and each piece is still in cache when the
 * kernel reads it. The resident kernels also decode BF16 words lying in their buffers to float32
 * (the checkpoint analysis's sampled SQNR rows).
 */
import { WASM_BASE64 } from '../wasm/generated/scale-histogram.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { ResidentScaleKernels, ScaleCountsKernel, ScaleHistogramKernel } from './scale-histogram.js';
import { align16, tryLoad, type WasmArena } from './wasm-arena.js';

interface ScaleHistogramExports {
  scale_histogram(p: number, rows: number, rowLength: number, wide: number): void;
  block_counts_bf16(p: number, blocks: number, totals: number, slow: number): number;
  block_counts_f32(p: number, blocks: number, totals: number, slow: number): number;
  decode_bf16(src: number, dst: number, count: number): void;
}

const COUNTS = 0; // u32 per scale byte
const TOTALS = 1024; // u32 saturated, kept, non-zero
const PIECE_BYTES = 64 << 10;
/** The most blocks one counts call takes (bfloat16 blocks in a piece): the length of the slow-block list. */
const CALL_BLOCKS = PIECE_BYTES / (2 * MX_BLOCK_SIZE);
const SLOW = 2048; // u32 block index per block of a call that the caller counts
const DATA = SLOW + 4 * CALL_BLOCKS;
const RESIDENT_BUFFERS = DATA + PIECE_BYTES;

export interface ScaleKernels {
  histogram: ScaleHistogramKernel;
  counts: ScaleCountsKernel;
  /** A new instance with its own memory and chunk buffers, for one reader. */
  resident(): ResidentScaleKernels | undefined;
}

/** Views of the arena's memory, made again after it grows (growing detaches the old ones). */
function viewsOf(arena: WasmArena<ScaleHistogramExports>) {
  let views: { buffer: ArrayBuffer; counts: Uint32Array; totals: Uint32Array; slow: Uint32Array; piece: { 2: Uint16Array; 4: Uint32Array } } | undefined;
  return () => {
    if (views?.buffer !== arena.buffer) {
      const buffer = arena.buffer;
      views = {
        buffer,
        counts: new Uint32Array(buffer, COUNTS, 256),
        totals: new Uint32Array(buffer, TOTALS, 3),
        slow: new Uint32Array(buffer, SLOW, CALL_BLOCKS),
        piece: { 2: new Uint16Array(buffer, DATA, PIECE_BYTES / 2), 4: new Uint32Array(buffer, DATA, PIECE_BYTES / 4) },
      };
    }
    return views;
  };
}

function kernelsOver(arena: WasmArena<ScaleHistogramExports>): { histogram: ScaleHistogramKernel; counts: ScaleCountsKernel } {
  const views = viewsOf(arena);
  /** Where the kernel finds words[start, start + length): in place when they are in its memory, else copied to the piece. */
  const locate = (words: Uint16Array | Uint32Array, start: number, length: number): number => {
    if (words.buffer === arena.buffer) return words.byteOffset + start * words.BYTES_PER_ELEMENT;
    views().piece[words.BYTES_PER_ELEMENT as 2 | 4].set(words.subarray(start, start + length));
    return DATA;
  };
  const histogram: ScaleHistogramKernel = (words, rows, rowLength, histogram) => {
    const wide = words.BYTES_PER_ELEMENT === 4 ? 1 : 0;
    // Rows made of whole blocks are one long row to the kernel: no per-row step.
    const scan = (start: number, pieceRows: number, length: number): void => {
      const p = locate(words, start, pieceRows * length);
      if (length % MX_BLOCK_SIZE === 0) arena.exports.scale_histogram(p, 1, pieceRows * length, wide);
      else arena.exports.scale_histogram(p, pieceRows, length, wide);
    };
    const pieceLength = PIECE_BYTES / words.BYTES_PER_ELEMENT;
    if (words.buffer === arena.buffer) scan(0, rows, rowLength);
    else if (rowLength <= pieceLength) {
      const rowsPerPiece = Math.floor(pieceLength / rowLength);
      for (let row = 0; row < rows; row += rowsPerPiece) scan(row * rowLength, Math.min(rowsPerPiece, rows - row), rowLength);
    } else {
      // A row longer than a piece goes in whole-block stretches (pieceLength is a multiple of 32); the last holds its partial block.
      for (let row = 0; row < rows; row++) {
        for (let offset = 0; offset < rowLength; offset += pieceLength) scan(row * rowLength + offset, 1, Math.min(pieceLength, rowLength - offset));
      }
    }
    const { counts } = views();
    for (let byte = 0; byte < 256; byte++) histogram[byte] += counts[byte]!;
    counts.fill(0);
    return true;
  };
  const blockCounts: ScaleCountsKernel = (words, blocks, stats, slowBlock) => {
    const kernel = words.BYTES_PER_ELEMENT === 4 ? arena.exports.block_counts_f32 : arena.exports.block_counts_bf16;
    const blocksPerCall = PIECE_BYTES / words.BYTES_PER_ELEMENT / MX_BLOCK_SIZE;
    const { counts, totals, slow } = views();
    totals.fill(0);
    for (let block = 0; block < blocks; block += blocksPerCall) {
      const count = Math.min(blocksPerCall, blocks - block);
      const start = block * MX_BLOCK_SIZE;
      const slowCount = kernel(locate(words, start, count * MX_BLOCK_SIZE), count, TOTALS, SLOW);
      for (let i = 0; i < slowCount; i++) slowBlock(start + slow[i]! * MX_BLOCK_SIZE);
    }
    for (let byte = 0; byte < 256; byte++) stats.expCounts[byte] += counts[byte]!;
    counts.fill(0);
    const [saturated, kept, nonZero] = totals;
    stats.saturated += saturated!;
    stats.flushed += nonZero! - kept!;
    stats.nonZero += nonZero!;
    return true;
  };
  return { histogram, counts: blockCounts };
}

function loadArena(): WasmArena<ScaleHistogramExports> | undefined {
  const arena = tryLoad<ScaleHistogramExports>(WASM_BASE64);
  arena?.ensure(RESIDENT_BUFFERS);
  return arena;
}

function residentKernels(): ResidentScaleKernels | undefined {
  const arena = loadArena();
  if (!arena) return undefined;
  let pair: readonly [Uint8Array, Uint8Array] = [new Uint8Array(0), new Uint8Array(0)];
  let capacity = 0;
  const buffers = (bytes: number): readonly [Uint8Array, Uint8Array] => {
    if (bytes > capacity) {
      capacity = align16(bytes);
      arena.ensure(RESIDENT_BUFFERS + 2 * capacity);
      pair = [new Uint8Array(arena.buffer, RESIDENT_BUFFERS, capacity), new Uint8Array(arena.buffer, RESIDENT_BUFFERS + capacity, capacity)];
    }
    return pair;
  };
  const decodeBf16 = (words: Uint16Array, out: Float32Array): boolean => {
    if (words.buffer !== arena.buffer) return false;
    // Through the piece, which stays in cache between the kernel's writes and the copy out.
    const pieceLength = PIECE_BYTES / 4;
    for (let offset = 0; offset < words.length; offset += pieceLength) {
      const length = Math.min(pieceLength, words.length - offset);
      arena.exports.decode_bf16(words.byteOffset + 2 * offset, DATA, length);
      out.set(new Float32Array(arena.buffer, DATA, length), offset);
    }
    return true;
  };
  return { ...kernelsOver(arena), buffers, decodeBf16 };
}

export function loadScaleHistogramWasm(): ScaleKernels | undefined {
  const arena = loadArena();
  return arena && { ...kernelsOver(arena), resident: residentKernels };
}

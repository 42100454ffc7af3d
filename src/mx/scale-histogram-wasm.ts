/**
 * Drives the WebAssembly SIMD scale histogram and the full pass's saturation/flush counts
 * (src/wasm/scale-histogram.wat). The caller's words are
 * copied into the module's memory in pieces of at most PIECE_BYTES (whole rows, or whole-block
 * stretches of a longer row), so memory stays fixed whatever the tensor size and each piece is
 * still in cache when the kernel reads it.
 */
import { WASM_BASE64 } from '../wasm/generated/scale-histogram.js';
import { MX_BLOCK_SIZE } from './layout.js';
import type { ScaleCountsKernel, ScaleHistogramKernel } from './scale-histogram.js';
import { tryLoad } from './wasm-arena.js';

interface ScaleHistogramExports {
  scale_histogram(p: number, rows: number, rowLength: number, wide: number): void;
  block_counts_bf16(p: number, blocks: number, totals: number, slow: number): number;
  block_counts_f32(p: number, blocks: number, totals: number, slow: number): number;
}

const COUNTS = 0; // u32 per scale byte
const TOTALS = 1024; // u32 saturated, kept, non-zero
const PIECE_BYTES = 64 << 10;
const SLOW = 2048; // u32 block index per block of a piece the caller counts
const DATA = SLOW + 4 * (PIECE_BYTES / (2 * MX_BLOCK_SIZE));

export interface ScaleKernels {
  histogram: ScaleHistogramKernel;
  counts: ScaleCountsKernel;
}

export function loadScaleHistogramWasm(): ScaleKernels | undefined {
  const arena = tryLoad<ScaleHistogramExports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(DATA + PIECE_BYTES);
  const counts = new Uint32Array(arena.buffer, COUNTS, 256);
  const pieces = { 2: new Uint16Array(arena.buffer, DATA, PIECE_BYTES / 2), 4: new Uint32Array(arena.buffer, DATA, PIECE_BYTES / 4) };
  const histogram: ScaleHistogramKernel = (words, rows, rowLength, histogram) => {
    const piece = pieces[words.BYTES_PER_ELEMENT as 2 | 4];
    const wide = words.BYTES_PER_ELEMENT === 4 ? 1 : 0;
    // Rows made of whole blocks are one long row to the kernel: no per-row step.
    const scan = (start: number, pieceRows: number, length: number): void => {
      piece.set(words.subarray(start, start + pieceRows * length));
      if (length % MX_BLOCK_SIZE === 0) arena.exports.scale_histogram(DATA, 1, pieceRows * length, wide);
      else arena.exports.scale_histogram(DATA, pieceRows, length, wide);
    };
    if (rowLength <= piece.length) {
      const rowsPerPiece = Math.floor(piece.length / rowLength);
      for (let row = 0; row < rows; row += rowsPerPiece) scan(row * rowLength, Math.min(rowsPerPiece, rows - row), rowLength);
    } else {
      // A row longer than a piece goes in whole-block stretches (piece.length is a multiple of 32); the last holds its partial block.
      for (let row = 0; row < rows; row++) {
        for (let offset = 0; offset < rowLength; offset += piece.length) scan(row * rowLength + offset, 1, Math.min(piece.length, rowLength - offset));
      }
    }
    for (let byte = 0; byte < 256; byte++) histogram[byte] += counts[byte];
    counts.fill(0);
    return true;
  };
  const totals = new Uint32Array(arena.buffer, TOTALS, 3);
  const slow = new Uint32Array(arena.buffer, SLOW, PIECE_BYTES / (2 * MX_BLOCK_SIZE));
  const blockCounts: ScaleCountsKernel = (words, blocks, stats, slowBlock) => {
    const piece = pieces[words.BYTES_PER_ELEMENT as 2 | 4];
    const kernel = words.BYTES_PER_ELEMENT === 4 ? arena.exports.block_counts_f32 : arena.exports.block_counts_bf16;
    const blocksPerPiece = piece.length / MX_BLOCK_SIZE;
    totals.fill(0);
    for (let block = 0; block < blocks; block += blocksPerPiece) {
      const count = Math.min(blocksPerPiece, blocks - block);
      const start = block * MX_BLOCK_SIZE;
      piece.set(words.subarray(start, start + count * MX_BLOCK_SIZE));
      const slowCount = kernel(DATA, count, TOTALS, SLOW);
      for (let i = 0; i < slowCount; i++) slowBlock(start + slow[i]! * MX_BLOCK_SIZE);
    }
    for (let byte = 0; byte < 256; byte++) stats.expCounts[byte] += counts[byte];
    counts.fill(0);
    const [saturated, kept, nonZero] = totals;
    stats.saturated += saturated!;
    stats.flushed += nonZero! - kept!;
    stats.nonZero += nonZero!;
    return true;
  };
  return { histogram, counts: blockCounts };
}

import type { MxStats } from './stats.js';

/**
 * Slot for an accelerated MXFP4 scale histogram over raw bfloat16 (Uint16Array) or float32
 * (Uint32Array) bit patterns, rows of `rowLength` with blocks of 32 along each row, the last one
 * partial. The TypeScript reference is the exponent-only pass in src/checkpoint/exponent-scan.ts.
 */

/** Adds one count per block to `counts` (indexed by scale byte), or returns false to leave the job to TypeScript. */
export type ScaleHistogramKernel = (words: Uint16Array | Uint32Array, rows: number, rowLength: number, counts: Uint32Array) => boolean;
let fastKernel: ScaleHistogramKernel | undefined;

/** Installs (or with undefined removes) the accelerated kernel. */
export function setScaleHistogramKernel(kernel: ScaleHistogramKernel | undefined): void {
  fastKernel = kernel;
}

/** Runs the accelerated kernel where one is installed; false when the caller must count. */
export function fastScaleHistogram(words: Uint16Array | Uint32Array, rows: number, rowLength: number, counts: Uint32Array): boolean {
  return fastKernel !== undefined && fastKernel(words, rows, rowLength, counts);
}

/**
 * The full pass over `blocks` whole blocks of 32 words: adds scale bytes, saturated, flushed and
 * nonZero to `stats` as src/checkpoint/exponent-scan.ts counts them, except for blocks with a
 * clamped or NaN scale, whose first word index goes to `slowBlock` for the caller to count.
 * Returns false to leave the whole job to the caller.
 */
export type ScaleCountsKernel = (words: Uint16Array | Uint32Array, blocks: number, stats: MxStats, slowBlock: (start: number) => void) => boolean;
let countsKernel: ScaleCountsKernel | undefined;

export function setScaleCountsKernel(kernel: ScaleCountsKernel | undefined): void {
  countsKernel = kernel;
}

export function fastScaleCounts(words: Uint16Array | Uint32Array, blocks: number, stats: MxStats, slowBlock: (start: number) => void): boolean {
  return countsKernel !== undefined && countsKernel(words, blocks, stats, slowBlock);
}

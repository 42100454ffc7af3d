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

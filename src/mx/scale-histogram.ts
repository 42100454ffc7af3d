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

/**
 * Both kernels over a memory of their own, with two chunk buffers in it that they read in place:
 * words in `buffers` are scanned where they lie, with no copy into the kernel's memory. One set per
 * reader (a checkpoint analysis) at a time, so concurrent readers never share buffers.
 */
export interface ResidentScaleKernels {
  /** Two buffers of at least `bytes` in the kernels' memory; a larger request invalidates the buffers handed out before. */
  buffers(bytes: number): readonly [Uint8Array, Uint8Array];
  histogram: ScaleHistogramKernel;
  counts: ScaleCountsKernel;
  /**
   * out[i] := the float32 of bfloat16 words[i], for words in `buffers` (decoded in place); false,
   * with `out` untouched, for words elsewhere. src/checkpoint/dtypes.ts's decodeInto is the reference.
   */
  decodeBf16(words: Uint16Array, out: Float32Array): boolean;
}
let residentFactory: (() => ResidentScaleKernels | undefined) | undefined;
/**
 * One set kept between readers: its buffers are already in memory, and touching fresh ones costs
 * about as much as reading them full (~55 ms per 16 MiB buffer here; page faults). Holds at most the
 * largest pair of chunk buffers asked for (2 × 8 MiB with the default chunk size).
 */
let idle: ResidentScaleKernels | undefined;
const madeBy = new WeakMap<ResidentScaleKernels, () => ResidentScaleKernels | undefined>();

export function setResidentScaleKernels(factory: (() => ResidentScaleKernels | undefined) | undefined): void {
  residentFactory = factory;
  idle = undefined;
}

/** A set of resident kernels for one reader, where accelerated kernels are installed, else undefined; hand it back with releaseResidentScaleKernels. */
export function acquireResidentScaleKernels(): ResidentScaleKernels | undefined {
  const kernels = idle ?? residentFactory?.();
  idle = undefined;
  if (kernels && residentFactory) madeBy.set(kernels, residentFactory);
  return kernels;
}

/** Keeps a reader's set for the next one, unless the backend changed since it was made. */
export function releaseResidentScaleKernels(kernels: ResidentScaleKernels | undefined): void {
  if (kernels && madeBy.get(kernels) === residentFactory) idle = kernels;
}

// The SQNR sample of one tensor: its sampled rows quantized under MXFP4 (plain and Hadamard-rotated),
// NVFP4 and MXFP8, statistics only. The same code runs in the analysing thread and in the sample
// workers (sqnr-worker.ts), so where it runs never changes a bit of the result: the rows of one
// tensor are quantized in the same batches, in the same order, by the same kernels.
import type { HadamardBlock } from '../protocol/index.js';
import type { FormatQuantizability, SqnrResult } from '../protocol/checkpoint-report.js';
import { createMxStats, mxfp4Stats, rotatedMxfp4Stats, sampleStats, type MxStats, type SampleStats } from '../mx/index.js';

/** What one tensor's sample adds up to; plain data, so it crosses from a worker as it is. */
export interface SqnrTotals extends SampleStats {
  rowsUsed: number;
}

/** How a tensor's sample is quantized: the row length and the Hadamard block (null where it does not divide the rows). */
export interface SampleShape {
  cols: number;
  hadamardBlock: HadamardBlock | null;
}

/** Float buffers that grow to the largest need and stay, for whichever tensor is being sampled. */
export class FloatBuffers {
  private readonly buffers = new Map<string, Float32Array>();

  get(use: string, size: number): Float32Array {
    let buffer = this.buffers.get(use);
    if (!buffer || buffer.length < size) this.buffers.set(use, (buffer = new Float32Array(size)));
    return buffer.subarray(0, size);
  }
}

/**
 * Quantizes the sampled rows into stats accumulators: MXFP4 unrotated and rotated, and NVFP4 and
 * MXFP8 (E4M3) unrotated, side by side. NVFP4's per-tensor scale comes from the rows quantized
 * together, so callers hand the same batches wherever they run.
 */
export class SqnrAccumulator {
  readonly totals: SqnrTotals = { rowsUsed: 0, plain: createMxStats(), rotated: createMxStats(), nvfp4: createMxStats(), mxfp8: createMxStats() };

  constructor(private readonly shape: SampleShape) {}

  /** A batch of whole rows (`rows` × cols floats), left as it is; `rotation` is scratch for the rotated copy. */
  quantizeRows(values: Float32Array, rows: number, rotation: Float32Array): void {
    if (rows === 0) return;
    sampleStats(values, this.shape.cols, this.shape.hadamardBlock, this.totals, rotation);
    this.totals.rowsUsed += rows;
  }
  /**
   * Part of one sampled row (rows wider than a chunk are read in pieces). `values` starts at a
   * multiple of 128 columns, so its MX and Hadamard blocks are the row's own. `endRow` counts the row.
   */
  quantizeSegment(values: Float32Array, rotation: Float32Array): void {
    if (this.shape.hadamardBlock !== null) rotatedMxfp4Stats(values, values.length, this.shape.hadamardBlock, this.totals.rotated, rotation);
    mxfp4Stats(values, values.length, this.totals.plain);
  }
  endRow(): void {
    this.totals.rowsUsed++;
  }
}

export function sqnrDb(stats: MxStats): number | null {
  if (!(stats.signalSq > 0) || !Number.isFinite(stats.signalSq) || !Number.isFinite(stats.errorSq)) return null;
  return stats.errorSq === 0 ? Infinity : 10 * Math.log10(stats.signalSq / stats.errorSq);
}

function quantizability(stats: MxStats): FormatQuantizability {
  return {
    db: sqnrDb(stats),
    saturatedFrac: stats.elements === 0 ? null : stats.saturated / stats.elements,
    flushedFrac: stats.nonZero === 0 ? (stats.elements === 0 ? null : 0) : stats.flushed / stats.nonZero,
  };
}

/** The report's SQNR figures from a sample's totals; `hadamardSkipped` says why the rotation did not apply. */
export function sqnrResult(totals: SqnrTotals, hadamardSkipped: string | undefined): SqnrResult {
  const { rotated } = totals;
  return {
    rowsUsed: totals.rowsUsed,
    noRotationDb: sqnrDb(totals.plain),
    hadamardDb: hadamardSkipped ? null : sqnrDb(rotated),
    hadamardSaturatedFrac: hadamardSkipped ? null : rotated.saturated / rotated.elements,
    hadamardFlushedFrac: hadamardSkipped ? null : rotated.nonZero === 0 ? 0 : rotated.flushed / rotated.nonZero,
    ...(hadamardSkipped ? { hadamardSkipped } : {}),
    formats: { nvfp4: quantizability(totals.nvfp4), mxfp8: quantizability(totals.mxfp8) },
  };
}

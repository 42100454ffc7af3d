// What an analysis or comparison produces: plain data (no I/O types), shared by the CLI, the
// extension host and the checkpoint webview, which imports this file alone.
import type { HadamardBlock } from './config.js';
import type { ScaleHistogram } from './telemetry.js';
import type { Dtype } from './dtypes.js';

/** Rows per tensor SQNR is measured on by default (evenly spaced; smaller tensors in full). */
export const SAMPLED_SQNR_ROWS = 256;

export interface AnalysisOptions {
  /**
   * 'histogram': the exponent-only pass (scale histogram and outlier blocks), fast enough for
   * checkpoints of hundreds of GB. 'full': adds exact saturated and flushed fractions and SQNR.
   */
  mode: 'histogram' | 'full';
  /** Block size of the deterministic (unsigned) Hadamard rotation SQNR is also measured under. */
  hadamardBlock: HadamardBlock;
  /** SQNR is measured on this many evenly spaced rows per tensor; 0 means every row. */
  sqnrRows: number;
  /** A block is an outlier block when its scale is at least this many binades above the tensor's median scale. */
  outlierBinades: number;
  /** Bytes of tensor data read per chunk (at least one row is always read whole). */
  chunkBytes: number;
}

export interface SqnrResult {
  /** Rows the SQNR figures were measured on (all rows when the tensor has no more than options.sqnrRows). */
  rowsUsed: number;
  /** 10·log10(Σx² / Σ(x − q(x))²) in dB; Infinity when lossless, null when the rows are all zero or non-finite. */
  noRotationDb: number | null;
  /** The same after the deterministic Hadamard rotation; null with `hadamardSkipped` when it does not apply. */
  hadamardDb: number | null;
  hadamardSaturatedFrac: number | null;
  hadamardFlushedFrac: number | null;
  hadamardSkipped?: string;
  /**
   * The same sampled rows under the other block formats, unrotated, for side-by-side quantizability:
   * NVFP4 (1×16 blocks, E4M3 scales, its per-tensor scale from the rows quantized together) and
   * MXFP8 E4M3 (floor scale rule). Absent in reports written before they existed.
   */
  formats?: { nvfp4: FormatQuantizability; mxfp8: FormatQuantizability };
}

export interface FormatQuantizability {
  /** SQNR in dB as `noRotationDb` defines it. */
  db: number | null;
  saturatedFrac: number | null;
  flushedFrac: number | null;
}

export interface MatrixAnalysis {
  rows: number;
  cols: number;
  blocks: number;
  /** Exact: every block of the tensor. */
  histogram: ScaleHistogram;
  /** Median unbiased scale exponent over the non-NaN blocks; null when every block is NaN. */
  medianScaleExp: number | null;
  /** Blocks whose scale is ≥ median + outlierBinades (their amax is ≥ 2^outlierBinades × a typical block's). */
  outlierBlocks: number;
  /** Exact over every element ('full' mode only). Fraction of elements that saturate at ±6·scale. */
  saturatedFrac: number | null;
  /** Exact over every element ('full' mode only). Fraction of non-zero elements that quantize to zero. */
  flushedFrac: number | null;
  sqnr: SqnrResult | null;
}

export interface TensorReport {
  name: string;
  dtype: Dtype;
  shape: number[];
  elements: number;
  bytes: number;
  analysis: MatrixAnalysis | null;
  /** Why `analysis` is null. */
  skipped?: string;
  /** What `analysis` covers when it is not what a float weight gets (a weight stored as MXFP4: its scales alone). */
  note?: string;
}

export interface CheckpointReport {
  path: string;
  shards: string[];
  metadata: Record<string, string>;
  dataBytes: number;
  options: AnalysisOptions;
  /** Sorted by name. */
  tensors: TensorReport[];
  seconds: number;
}

export interface TensorSummary {
  name: string;
  dtype: Dtype;
  shape: number[];
  bytes: number;
}

export interface ScaleShift {
  /** Mean unbiased block-scale exponent of each side (NaN blocks left out). */
  meanExpA: number;
  meanExpB: number;
  /** meanExpB − meanExpA: positive when B's blocks got larger scales. */
  meanShift: number;
  /**
   * Earth mover's (Wasserstein-1) distance between the two normalised scale histograms, in binades:
   * the average number of binades a block's scale must move to turn A's distribution into B's.
   * 0 for identical distributions; it sees changes in spread that the mean shift misses.
   */
  emd: number;
  histogramA: ScaleHistogram;
  histogramB: ScaleHistogram;
}

export interface TensorDiff {
  name: string;
  a: TensorSummary;
  b: TensorSummary;
  /** ‖A − B‖₂ / ‖A‖₂ over all elements; null when not comparable (see `note`) or ‖A‖ = 0 or non-finite. */
  relativeChange: number | null;
  /** Weight matrices (2-D and up, floating point) only. */
  scaleShift: ScaleShift | null;
  /** Why figures are missing, or what differs besides the values (e.g. the dtype). */
  note?: string;
}

export interface CheckpointComparison {
  a: string;
  b: string;
  /** Largest tensor first (by the larger side's bytes), then by name. */
  matched: TensorDiff[];
  onlyInA: TensorSummary[];
  onlyInB: TensorSummary[];
  seconds: number;
}

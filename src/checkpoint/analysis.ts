// MXFP4 quantizability of every weight matrix in a checkpoint, streamed chunk by chunk so memory
// stays at a few chunks whatever the file size. A tensor of shape [..., cols] is analysed as a
// [rows, cols] matrix with 32-element blocks along its last (contiguous) axis, the reduction axis
// of the forward GEMM for a [out, in] weight.
import type { HadamardBlock, ScaleHistogram } from '../protocol/index.js';
import { SAMPLED_SQNR_ROWS, type AnalysisOptions, type CheckpointReport, type FormatQuantizability, type MatrixAnalysis, type TensorReport } from '../protocol/checkpoint-report.js';
import { createMxStats, E8M0_BIAS, E8M0_NAN, mxfp4Stats, mxfp8Stats, nvfp4Stats, hadamardInPlace, acquireResidentScaleKernels, releaseResidentScaleKernels, type MxStats } from '../mx/index.js';
import type { Checkpoint, CheckpointTensor } from './checkpoint.js';
import type { NextRead } from './file.js';
import { DTYPE_BYTES, decodeInto, isFloatDtype, type FloatDtype } from './dtypes.js';
import { scanBf16, scanF32 } from './exponent-scan.js';

export const DEFAULT_ANALYSIS_OPTIONS: AnalysisOptions = {
  mode: 'full',
  hadamardBlock: 32,
  sqnrRows: SAMPLED_SQNR_ROWS,
  outlierBinades: 3,
  chunkBytes: 16 << 20,
};

/** Called after every chunk with the bytes of tensor data analysed so far. */
export type ProgressCallback = (bytesDone: number) => void;

export interface AnalysisControl {
  onProgress?: ProgressCallback;
  signal?: AbortSignal;
}

export function toScaleHistogram(expCounts: Uint32Array): ScaleHistogram {
  let first = -1;
  let last = -1;
  for (let byte = 0; byte < E8M0_NAN; byte++) {
    if (expCounts[byte] === 0) continue;
    if (first < 0) first = byte;
    last = byte;
  }
  const counts = first < 0 ? [] : Array.from(expCounts.subarray(first, last + 1));
  return { minExp: first < 0 ? 0 : first - E8M0_BIAS, counts, nanBlocks: expCounts[E8M0_NAN] };
}

function medianExp(histogram: ScaleHistogram): number | null {
  const total = histogram.counts.reduce((sum, count) => sum + count, 0);
  if (total === 0) return null;
  let seen = 0;
  for (let i = 0; i < histogram.counts.length; i++) {
    seen += histogram.counts[i];
    if (seen * 2 >= total) return histogram.minExp + i;
  }
  return null;
}

function outlierCount(histogram: ScaleHistogram, median: number | null, binades: number): number {
  if (median === null) return 0;
  return histogram.counts.reduce((sum, count, i) => (histogram.minExp + i >= median + binades ? sum + count : sum), 0);
}

function sqnrDb(stats: MxStats): number | null {
  if (!(stats.signalSq > 0) || !Number.isFinite(stats.signalSq) || !Number.isFinite(stats.errorSq)) return null;
  return stats.errorSq === 0 ? Infinity : 10 * Math.log10(stats.signalSq / stats.errorSq);
}

/** Why a tensor gets no MXFP4 analysis, or undefined when it does. */
function skipReason(tensor: CheckpointTensor): string | undefined {
  if (!isFloatDtype(tensor.dtype)) return `${tensor.dtype} is not a floating-point dtype`;
  if (tensor.shape.length < 2) return tensor.shape.length === 0 ? 'scalar' : '1-D (not a weight matrix)';
  if (tensor.elements === 0) return 'empty';
  return undefined;
}

interface FloatScratch {
  decoded: Float32Array;
  sample: Float32Array;
  rotated: Float32Array;
}
/**
 * The float buffers of the last analysis that finished, for the next one: fresh pages cost a first
 * touch (~3 µs a KiB on this machine, 8 MiB of SQNR scratch with the default options) every time.
 */
let idleFloats: FloatScratch | undefined;

/** Scratch buffers shared by every tensor of one analysis; each grows to the largest need and stays. */
class Scratch {
  /**
   * This analysis's own scan kernels where they are accelerated: the file is read straight into
   * their memory and scanned there, with no copy (a copy cost as much as the read itself). Handed
   * back by `release`, for the next analysis to reuse their buffers.
   */
  readonly kernels = acquireResidentScaleKernels();
  private raw: readonly [Uint8Array, Uint8Array] = [new Uint8Array(0), new Uint8Array(0)];
  private readonly floats: FloatScratch = idleFloats ?? { decoded: new Float32Array(0), sample: new Float32Array(0), rotated: new Float32Array(0) };

  constructor() {
    idleFloats = undefined;
  }

  /** The two chunk buffers SafetensorsFile.chunks alternates between. */
  chunkBuffers(size: number): readonly [Uint8Array, Uint8Array] {
    if (this.raw[0].byteLength < size) this.raw = this.kernels ? this.kernels.buffers(size) : [new Uint8Array(size), new Uint8Array(size)];
    return this.raw;
  }
  float32(use: keyof FloatScratch, size: number): Float32Array {
    if (this.floats[use].length < size) this.floats[use] = new Float32Array(size);
    return this.floats[use].subarray(0, size);
  }
  /** Decodes `count` elements of a chunk (or a piece of one) to float32: BF16 rows in the kernels' buffers by their SIMD decoder. */
  decode(dtype: FloatDtype, bytes: Uint8Array, out: Float32Array, count: number): void {
    if (dtype === 'BF16' && bytes.byteOffset % 2 === 0 && this.kernels?.decodeBf16(new Uint16Array(bytes.buffer, bytes.byteOffset, count), out)) return;
    decodeInto(dtype, bytes, out, count);
  }
  release(): void {
    releaseResidentScaleKernels(this.kernels);
    idleFloats = this.floats;
  }
}

/** Evenly spaced rows: k·rows/n for k < n, so the sample spans the whole tensor deterministically. */
class RowSample {
  private k = 0;
  readonly size: number;

  constructor(private readonly rows: number, wanted: number) {
    this.size = wanted === 0 || wanted >= rows ? rows : wanted;
  }
  /** The next sampled row below `end`, or -1. */
  nextBelow(end: number): number {
    if (this.k >= this.size) return -1;
    const row = Math.floor((this.k * this.rows) / this.size);
    if (row >= end) return -1;
    this.k++;
    return row;
  }
}

function quantizability(stats: MxStats): FormatQuantizability {
  return {
    db: sqnrDb(stats),
    saturatedFrac: stats.elements === 0 ? null : stats.saturated / stats.elements,
    flushedFrac: stats.nonZero === 0 ? (stats.elements === 0 ? null : 0) : stats.flushed / stats.nonZero,
  };
}

/**
 * Quantizes the sampled rows gathered so far into stats accumulators: MXFP4 unrotated and rotated,
 * and NVFP4 and MXFP8 (E4M3) unrotated, side by side.
 */
class SqnrAccumulator {
  readonly plain = createMxStats();
  readonly rotated = createMxStats();
  readonly nvfp4 = createMxStats();
  readonly mxfp8 = createMxStats();
  rowsUsed = 0;
  private pending = 0;

  constructor(
    private readonly cols: number,
    private readonly batch: Float32Array,
    private readonly rotation: Float32Array,
    private readonly hadamardBlock: HadamardBlock | null,
  ) {}

  get capacityRows(): number {
    return this.batch.length / this.cols;
  }
  /** Where the caller decodes the next sampled row. */
  nextRow(): Float32Array {
    if (this.pending === this.capacityRows) this.flush();
    return this.batch.subarray(this.pending * this.cols, ++this.pending * this.cols);
  }
  /**
   * Quantizes part of one sampled row at once (rows wider than a chunk are read in pieces). `values`
   * starts at a multiple of 128 columns, so its MX and Hadamard blocks are the row's own.
   */
  quantizeSegment(values: Float32Array, rotation: Float32Array): void {
    this.addRotated(values, rotation, 1, values.length);
    mxfp4Stats(values, values.length, this.plain);
  }
  /** The statistics-only kernels read the batch without changing it: only the Hadamard rotation needs a copy. */
  flush(): void {
    if (this.pending === 0) return;
    const length = this.pending * this.cols;
    const values = this.batch.subarray(0, length);
    nvfp4Stats(values, this.cols, this.nvfp4);
    mxfp8Stats(values, this.cols, 'e4m3', this.mxfp8);
    this.addRotated(values, this.rotation, this.pending, this.cols);
    mxfp4Stats(values, this.cols, this.plain);
    this.rowsUsed += this.pending;
    this.pending = 0;
  }
  /** MXFP4 statistics of the rows after the Hadamard rotation, which works in place: on a copy. */
  private addRotated(values: Float32Array, rotation: Float32Array, rows: number, cols: number): void {
    if (this.hadamardBlock === null) return;
    const rotated = rotation.subarray(0, values.length);
    rotated.set(values);
    hadamardInPlace(rotated, rows, cols, 1, this.hadamardBlock);
    mxfp4Stats(rotated, cols, this.rotated);
  }
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new Error('checkpoint analysis cancelled');
}

/** A row over the chunk size is read in segments of a multiple of this many columns (every MX and Hadamard block whole). */
const SEGMENT_ALIGN = 128;

/** How a tensor is read: whole rows `chunkRows` at a time, or (wide) each row in segments of `segment` elements. */
function chunking(tensor: CheckpointTensor, options: AnalysisOptions): { wide: boolean; chunkRows: number; segment: number } {
  const cols = tensor.shape[tensor.shape.length - 1];
  const rows = tensor.elements / cols;
  const elementBytes = DTYPE_BYTES[tensor.dtype as FloatDtype];
  // A row wider than a chunk is read in segments, so memory follows the chunk size, not the row
  // length (a [1, 2^28] F32 tensor needed 2 GiB of buffers and 2 GiB of SQNR scratch).
  const wide = cols * elementBytes > options.chunkBytes;
  const chunkRows = wide ? 1 : Math.max(1, Math.min(rows, Math.floor(options.chunkBytes / (cols * elementBytes))));
  const segment = wide ? Math.max(SEGMENT_ALIGN, Math.floor(options.chunkBytes / elementBytes / SEGMENT_ALIGN) * SEGMENT_ALIGN) : cols;
  return { wide, chunkRows, segment };
}

/** What `tensor` is read through, given the tensor analysed after it: its first chunk can be read ahead when it is read whole-row from the same file. */
function nextRead(tensor: CheckpointTensor, next: CheckpointTensor | undefined, options: AnalysisOptions): NextRead | undefined {
  if (!next || next.file !== tensor.file || chunking(tensor, options).wide) return undefined;
  const { wide, chunkRows } = chunking(next, options);
  return wide ? undefined : { info: next, chunkElements: chunkRows * next.shape[next.shape.length - 1] };
}

async function analyseTensor(tensor: CheckpointTensor, options: AnalysisOptions, scratch: Scratch, control: AnalysisControl = {}, doneBefore = 0, then?: NextRead): Promise<MatrixAnalysis> {
  const dtype = tensor.dtype as FloatDtype;
  const cols = tensor.shape[tensor.shape.length - 1];
  const rows = tensor.elements / cols;
  const elementBytes = DTYPE_BYTES[dtype];
  const exponentsOnly = options.mode === 'histogram';
  const stats = createMxStats();
  const hadamardSkipped = cols % options.hadamardBlock === 0 ? undefined : `cols ${cols} is not a multiple of the Hadamard block ${options.hadamardBlock}`;
  const sample = exponentsOnly ? null : new RowSample(rows, options.sqnrRows);
  const { wide, chunkRows, segment } = chunking(tensor, options);
  const sampleRows = wide ? 1 : Math.min(chunkRows, sample?.size ?? 0);
  const sqnr = sample
    ? new SqnrAccumulator(cols, scratch.float32('sample', wide ? 0 : sampleRows * cols), scratch.float32('rotated', sampleRows * segment), hadamardSkipped ? null : options.hadamardBlock)
    : null;

  const scanChunk = (chunk: Uint8Array, rowsHere: number, rowLength: number): void => {
    const count = chunk.byteLength / elementBytes;
    if (dtype === 'BF16') scanBf16(new Uint16Array(chunk.buffer, chunk.byteOffset, count), rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    else if (dtype === 'F32') scanF32(new Float32Array(chunk.buffer, chunk.byteOffset, count), rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    else {
      const decoded = scratch.float32('decoded', count);
      decodeInto(dtype, chunk, decoded, count);
      scanF32(decoded, rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    }
  };

  if (wide) {
    const rowBytes = cols * elementBytes;
    const buffers = scratch.chunkBuffers(segment * elementBytes);
    for (let row = 0; row < rows; row++) {
      // Sampled rows are distinct and increasing: the next one is this row or a later one.
      const isSampled = sample !== null && sample.nextBelow(row + 1) === row;
      const rowInfo = { ...tensor, fileOffset: tensor.fileOffset + row * rowBytes, byteLength: rowBytes, elements: cols };
      for await (const piece of tensor.file.chunks(rowInfo, segment, buffers)) {
        throwIfAborted(control.signal);
        const count = piece.byteLength / elementBytes;
        scanChunk(piece, 1, count);
        if (isSampled && sqnr) {
          const values = scratch.float32('decoded', count);
          scratch.decode(dtype, piece, values, count);
          sqnr.quantizeSegment(values, scratch.float32('rotated', count));
        }
      }
      if (isSampled && sqnr) sqnr.rowsUsed++;
      control.onProgress?.(doneBefore + (row + 1) * rowBytes);
    }
  } else {
    let firstRow = 0;
    for await (const chunk of tensor.file.chunks(tensor, chunkRows * cols, scratch.chunkBuffers(chunkRows * cols * elementBytes), then)) {
      throwIfAborted(control.signal);
      const rowsHere = chunk.byteLength / elementBytes / cols;
      scanChunk(chunk, rowsHere, cols);
      if (sample && sqnr) {
        for (let row = sample.nextBelow(firstRow + rowsHere); row >= 0; row = sample.nextBelow(firstRow + rowsHere)) {
          const offset = (row - firstRow) * cols * elementBytes;
          scratch.decode(dtype, chunk.subarray(offset, offset + cols * elementBytes), sqnr.nextRow(), cols);
        }
      }
      firstRow += rowsHere;
      control.onProgress?.(doneBefore + firstRow * cols * elementBytes);
    }
    sqnr?.flush();
  }

  const histogram = toScaleHistogram(stats.expCounts);
  const medianScaleExp = medianExp(histogram);
  return {
    rows,
    cols,
    blocks: stats.blocks,
    histogram,
    medianScaleExp,
    outlierBlocks: outlierCount(histogram, medianScaleExp, options.outlierBinades),
    saturatedFrac: exponentsOnly ? null : stats.saturated / stats.elements,
    flushedFrac: exponentsOnly ? null : stats.nonZero === 0 ? 0 : stats.flushed / stats.nonZero,
    sqnr: sqnr && {
      rowsUsed: sqnr.rowsUsed,
      noRotationDb: sqnrDb(sqnr.plain),
      hadamardDb: hadamardSkipped ? null : sqnrDb(sqnr.rotated),
      hadamardSaturatedFrac: hadamardSkipped ? null : sqnr.rotated.saturated / sqnr.rotated.elements,
      hadamardFlushedFrac: hadamardSkipped ? null : sqnr.rotated.nonZero === 0 ? 0 : sqnr.rotated.flushed / sqnr.rotated.nonZero,
      ...(hadamardSkipped ? { hadamardSkipped } : {}),
      formats: { nvfp4: quantizability(sqnr.nvfp4), mxfp8: quantizability(sqnr.mxfp8) },
    },
  };
}

export async function analyseCheckpoint(checkpoint: Checkpoint, options: AnalysisOptions, control: AnalysisControl = {}): Promise<CheckpointReport> {
  const started = performance.now();
  const scratch = new Scratch();
  const tensors: TensorReport[] = [];
  let done = 0;
  const analysed = checkpoint.tensors.filter((tensor) => skipReason(tensor) === undefined);
  const following = new Map(analysed.map((tensor, i) => [tensor, analysed[i + 1]]));
  try {
    for (const tensor of checkpoint.tensors) {
      throwIfAborted(control.signal);
      const skipped = skipReason(tensor);
      const then = skipped ? undefined : nextRead(tensor, following.get(tensor), options);
      const analysis = skipped ? null : await analyseTensor(tensor, options, scratch, control, done, then);
      done += tensor.byteLength;
      control.onProgress?.(done);
      tensors.push({ name: tensor.name, dtype: tensor.dtype, shape: [...tensor.shape], elements: tensor.elements, bytes: tensor.byteLength, analysis, ...(skipped ? { skipped } : {}) });
    }
  } finally {
    // A first chunk read ahead must land before the buffers go back to the pool.
    await Promise.all([...new Set(checkpoint.tensors.map((tensor) => tensor.file))].map((file) => file.settle()));
    scratch.release();
  }
  return {
    path: checkpoint.path,
    shards: checkpoint.shards,
    metadata: checkpoint.metadata,
    dataBytes: checkpoint.dataBytes,
    options,
    tensors,
    seconds: (performance.now() - started) / 1000,
  };
}

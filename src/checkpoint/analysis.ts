// MXFP4 quantizability of every weight matrix in a checkpoint, streamed chunk by chunk so memory
// stays at a few chunks whatever the file size. A tensor of shape [..., cols] is analysed as a
// [rows, cols] matrix with 32-element blocks along its last (contiguous) axis, the reduction axis
// of the forward GEMM for a [out, in] weight. The full pass's SQNR sample is quantized on a sample
// worker where one is free (sqnr-workers.ts), else here; the report is the same bits either way.
import type { ScaleHistogram } from '../protocol/index.js';
import { SAMPLED_SQNR_ROWS, type AnalysisOptions, type CheckpointReport, type MatrixAnalysis, type TensorReport } from '../protocol/checkpoint-report.js';
import { createMxStats, E8M0_BIAS, E8M0_NAN, acquireResidentScaleKernels, releaseResidentScaleKernels } from '../mx/index.js';
import type { Checkpoint, CheckpointTensor } from './checkpoint.js';
import type { NextRead } from './file.js';
import { DTYPE_BYTES, decodeInto, isFloatDtype, type FloatDtype } from './dtypes.js';
import { scanBf16, scanF32 } from './exponent-scan.js';
import { LocalSample, type SampleSink } from './sample-sink.js';
import { FloatBuffers, sqnrResult } from './sqnr-sample.js';
import { remoteSample } from './sqnr-workers.js';

export const DEFAULT_ANALYSIS_OPTIONS: AnalysisOptions = {
  mode: 'full',
  hadamardBlock: 32,
  sqnrRows: SAMPLED_SQNR_ROWS,
  outlierBinades: 3,
  // Two chunks are in flight (one scanned, the next being read). 8 MiB rather than 16: 13-16 MiB
  // less peak memory everywhere, and on an EPYC VM a ~1.45× faster histogram pass (likely the pair
  // fits its last-level cache between the read's copy and the scan); the same speed on a Xeon host
  // (docs/checkpoints.md, "Chunk size").
  chunkBytes: 8 << 20,
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

/** What a tensor's scale bytes (counted by byte) say: its histogram, median and outlier blocks. */
function scaleSummary(expCounts: Uint32Array, outlierBinades: number): Pick<MatrixAnalysis, 'histogram' | 'medianScaleExp' | 'outlierBlocks'> {
  const histogram = toScaleHistogram(expCounts);
  const medianScaleExp = medianExp(histogram);
  return { histogram, medianScaleExp, outlierBlocks: outlierCount(histogram, medianScaleExp, outlierBinades) };
}

/**
 * Checkpoints already in MXFP4 (GPT-OSS's experts) keep each weight as two U8 tensors: `<name>_blocks`,
 * 32 FP4 codes in 16 bytes a block, and `<name>_scales`, one E8M0 scale per block. The scales are
 * analysed (analyseStoredScales); the codes are named as what they are rather than "not a
 * floating-point dtype", which reads as if the weight were missing.
 */
function packedMxfp4Reason(tensor: CheckpointTensor): string | undefined {
  const packed = packedPart(tensor.name);
  if (tensor.dtype !== 'U8' || !packed) return undefined;
  const { base, part } = packed;
  return part === 'blocks'
    ? `packed MXFP4 codes of ${base} (two FP4 values a byte): its stored E8M0 scales are analysed under ${base}_scales`
    : `E8M0 scales of ${base} without a ${base}_blocks tensor of their shape and 16 bytes a block: not analysed`;
}

/** `<base>_blocks` or `<base>_scales`: the weight's name and which half of its MXFP4 the tensor holds. */
function packedPart(name: string): { base: string; part: 'blocks' | 'scales' } | undefined {
  const match = /^(.+)_(blocks|scales)$/.exec(name);
  return match ? { base: match[1]!, part: match[2] as 'blocks' | 'scales' } : undefined;
}

/** The `<name>_scales` tensors whose `<name>_blocks` lies beside them: weights stored as MXFP4. */
function storedScaleTensors(tensors: readonly CheckpointTensor[]): Set<CheckpointTensor> {
  const byName = new Map(tensors.map((tensor) => [tensor.name, tensor]));
  const stored = new Set<CheckpointTensor>();
  for (const scales of tensors) {
    const packed = packedPart(scales.name);
    const blocks = packed?.part === 'scales' ? byName.get(`${packed.base}_blocks`) : undefined;
    if (scales.dtype !== 'U8' || blocks?.dtype !== 'U8' || scales.shape.length === 0 || scales.elements === 0) continue;
    if (blocks.shape.length === scales.shape.length + 1 && blocks.shape.at(-1) === 16 && scales.shape.every((size, i) => blocks.shape[i] === size)) stored.add(scales);
  }
  return stored;
}

function storedMxfp4Note(scales: CheckpointTensor): string {
  const base = packedPart(scales.name)!.base;
  return `${base} stored as MXFP4 (codes in ${base}_blocks): its E8M0 scales' histogram; saturation, flushing and SQNR need the values before quantization`;
}

/**
 * A stored MXFP4 weight's analysis from its E8M0 scales: the scale histogram, median and outlier
 * blocks, as the histogram pass gives a float weight (the same scale bytes quantizing it would
 * choose, had it been quantized from these values). Saturation, flushing and SQNR need the values
 * before quantization, which the checkpoint no longer has: null.
 */
async function analyseStoredScales(tensor: CheckpointTensor, options: AnalysisOptions, scratch: Scratch, control: AnalysisControl, doneBefore: number): Promise<MatrixAnalysis> {
  const counts = new Uint32Array(256);
  let done = 0;
  // The pooled chunk buffers: fresh ones per tensor would cost their first touch each time (GPT-OSS has 48 such tensors).
  for await (const chunk of tensor.file.chunks(tensor, options.chunkBytes, scratch.chunkBuffers(options.chunkBytes))) {
    throwIfAborted(control.signal);
    for (let i = 0; i < chunk.length; i++) counts[chunk[i]!]++;
    done += chunk.byteLength;
    control.onProgress?.(doneBefore + done);
  }
  const groups = tensor.shape[tensor.shape.length - 1]!;
  return {
    rows: tensor.elements / groups,
    cols: groups * 32,
    blocks: tensor.elements,
    ...scaleSummary(counts, options.outlierBinades),
    saturatedFrac: null,
    flushedFrac: null,
    sqnr: null,
  };
}

/** Why a tensor gets no MXFP4 analysis, or undefined when it does. */
function skipReason(tensor: CheckpointTensor): string | undefined {
  if (!isFloatDtype(tensor.dtype)) return packedMxfp4Reason(tensor) ?? `${tensor.dtype} is not a floating-point dtype`;
  if (tensor.shape.length < 2) return tensor.shape.length === 0 ? 'scalar' : '1-D (not a weight matrix)';
  if (tensor.elements === 0) return 'empty';
  return undefined;
}

/**
 * The float buffers of the last analysis that finished, for the next one: fresh pages cost a first
 * touch (~3 µs a KiB on this machine, 8 MiB of SQNR scratch with the default options) every time.
 */
let idleFloats: FloatBuffers | undefined;

/** Scratch buffers shared by every tensor of one analysis; each grows to the largest need and stays. */
class Scratch {
  /**
   * This analysis's own scan kernels where they are accelerated: the file is read straight into
   * their memory and scanned there, with no copy (a copy cost as much as the read itself). Handed
   * back by `release`, for the next analysis to reuse their buffers.
   */
  readonly kernels = acquireResidentScaleKernels();
  private raw: readonly [Uint8Array, Uint8Array] = [new Uint8Array(0), new Uint8Array(0)];
  readonly floats = idleFloats ?? new FloatBuffers();

  constructor() {
    idleFloats = undefined;
  }

  /** The two chunk buffers SafetensorsFile.chunks alternates between. */
  chunkBuffers(size: number): readonly [Uint8Array, Uint8Array] {
    if (this.raw[0].byteLength < size) this.raw = this.kernels ? this.kernels.buffers(size) : [new Uint8Array(size), new Uint8Array(size)];
    return this.raw;
  }
  /** Decodes `count` elements of a chunk (or a piece of one) to float32: BF16 rows in the kernels' buffers by their SIMD decoder. */
  readonly decode = (dtype: FloatDtype, bytes: Uint8Array, out: Float32Array, count: number): void => {
    if (dtype === 'BF16' && bytes.byteOffset % 2 === 0 && this.kernels?.decodeBf16(new Uint16Array(bytes.buffer, bytes.byteOffset, count), out)) return;
    decodeInto(dtype, bytes, out, count);
  };
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

/**
 * Reads and counts one tensor, handing its sampled rows to `sink` (null in histogram mode). Resolves
 * once the tensor is read, with its analysis still to come: a sample worker may be quantizing the
 * last rows while the next tensor is read.
 */
async function analyseTensor(tensor: CheckpointTensor, options: AnalysisOptions, scratch: Scratch, control: AnalysisControl, doneBefore: number, then: NextRead | undefined): Promise<{ analysis: Promise<MatrixAnalysis>; sink: SampleSink | null }> {
  const dtype = tensor.dtype as FloatDtype;
  const cols = tensor.shape[tensor.shape.length - 1];
  const rows = tensor.elements / cols;
  const elementBytes = DTYPE_BYTES[dtype];
  const exponentsOnly = options.mode === 'histogram';
  const stats = createMxStats();
  const hadamardSkipped = cols % options.hadamardBlock === 0 ? undefined : `cols ${cols} is not a multiple of the Hadamard block ${options.hadamardBlock}`;
  const sample = exponentsOnly ? null : new RowSample(rows, options.sqnrRows);
  const { wide, chunkRows, segment } = chunking(tensor, options);
  const shape = { cols, hadamardBlock: hadamardSkipped ? null : options.hadamardBlock };
  // Rows quantized together: up to a chunk's worth (a wide row goes segment by segment).
  const batchRows = wide ? 1 : Math.min(chunkRows, sample?.size ?? 0);
  const sink = sample && (remoteSample(`${tensor.file.path}: tensor "${tensor.name}"`, shape, dtype, batchRows) ?? new LocalSample(shape, dtype, batchRows, scratch.decode, scratch.floats));

  const scanChunk = (chunk: Uint8Array, rowsHere: number, rowLength: number): void => {
    const count = chunk.byteLength / elementBytes;
    if (dtype === 'BF16') scanBf16(new Uint16Array(chunk.buffer, chunk.byteOffset, count), rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    else if (dtype === 'F32') scanF32(new Float32Array(chunk.buffer, chunk.byteOffset, count), rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    else {
      const decoded = scratch.floats.get('decoded', count);
      decodeInto(dtype, chunk, decoded, count);
      scanF32(decoded, rowsHere, rowLength, stats, exponentsOnly, scratch.kernels);
    }
  };

  try {
    if (wide) {
      const rowBytes = cols * elementBytes;
      const buffers = scratch.chunkBuffers(segment * elementBytes);
      for (let row = 0; row < rows; row++) {
        // Sampled rows are distinct and increasing: the next one is this row or a later one.
        const isSampled = sample !== null && sample.nextBelow(row + 1) === row;
        const rowInfo = { ...tensor, fileOffset: tensor.fileOffset + row * rowBytes, byteLength: rowBytes, elements: cols };
        for await (const piece of tensor.file.chunks(rowInfo, segment, buffers)) {
          throwIfAborted(control.signal);
          await sink?.ready();
          scanChunk(piece, 1, piece.byteLength / elementBytes);
          if (isSampled) sink?.segment(piece);
        }
        if (isSampled) sink?.endRow();
        control.onProgress?.(doneBefore + (row + 1) * rowBytes);
      }
    } else {
      let firstRow = 0;
      for await (const chunk of tensor.file.chunks(tensor, chunkRows * cols, scratch.chunkBuffers(chunkRows * cols * elementBytes), then)) {
        throwIfAborted(control.signal);
        await sink?.ready();
        const rowsHere = chunk.byteLength / elementBytes / cols;
        scanChunk(chunk, rowsHere, cols);
        if (sample && sink) {
          for (let row = sample.nextBelow(firstRow + rowsHere); row >= 0; row = sample.nextBelow(firstRow + rowsHere)) {
            const offset = (row - firstRow) * cols * elementBytes;
            sink.row(chunk.subarray(offset, offset + cols * elementBytes));
          }
        }
        firstRow += rowsHere;
        control.onProgress?.(doneBefore + firstRow * cols * elementBytes);
      }
    }
  } catch (error) {
    sink?.drop();
    throw error;
  }

  const scales = scaleSummary(stats.expCounts, options.outlierBinades);
  const totals = sink?.finish();
  const analysis = async (): Promise<MatrixAnalysis> => ({
    rows,
    cols,
    blocks: stats.blocks,
    ...scales,
    saturatedFrac: exponentsOnly ? null : stats.saturated / stats.elements,
    flushedFrac: exponentsOnly ? null : stats.nonZero === 0 ? 0 : stats.flushed / stats.nonZero,
    sqnr: totals ? sqnrResult(await totals, hadamardSkipped) : null,
  });
  return { analysis: analysis(), sink };
}

export async function analyseCheckpoint(checkpoint: Checkpoint, options: AnalysisOptions, control: AnalysisControl = {}): Promise<CheckpointReport> {
  const started = performance.now();
  const scratch = new Scratch();
  const tensors: { report: Omit<TensorReport, 'analysis'>; analysis: Promise<MatrixAnalysis> | null }[] = [];
  const sinks: SampleSink[] = [];
  let done = 0;
  const analysed = checkpoint.tensors.filter((tensor) => skipReason(tensor) === undefined);
  const storedScales = storedScaleTensors(checkpoint.tensors);
  const following = new Map(analysed.map((tensor, i) => [tensor, analysed[i + 1]]));
  try {
    for (const tensor of checkpoint.tensors) {
      throwIfAborted(control.signal);
      const stored = storedScales.has(tensor);
      const skipped = stored ? undefined : skipReason(tensor);
      const then = skipped || stored ? undefined : nextRead(tensor, following.get(tensor), options);
      // Stored scales are counted in place: they share the chunk buffers with the tensors after them.
      const read = stored
        ? { analysis: Promise.resolve(await analyseStoredScales(tensor, options, scratch, control, done)), sink: null }
        : skipped ? null : await analyseTensor(tensor, options, scratch, control, done, then);
      if (read?.sink) sinks.push(read.sink);
      // Awaited below, once every tensor is read; a sample that fails before then is not unhandled.
      read?.analysis.catch(() => undefined);
      done += tensor.byteLength;
      control.onProgress?.(done);
      const note = stored ? storedMxfp4Note(tensor) : undefined;
      tensors.push({ report: { name: tensor.name, dtype: tensor.dtype, shape: [...tensor.shape], elements: tensor.elements, bytes: tensor.byteLength, ...(skipped ? { skipped } : {}), ...(note ? { note } : {}) }, analysis: read?.analysis ?? null });
    }
    const reports: TensorReport[] = [];
    for (const { report, analysis } of tensors) {
      const { skipped, note, ...rest } = report;
      reports.push({ ...rest, analysis: analysis && (await analysis), ...(skipped ? { skipped } : {}), ...(note ? { note } : {}) });
    }
    return {
      path: checkpoint.path,
      shards: checkpoint.shards,
      metadata: checkpoint.metadata,
      dataBytes: checkpoint.dataBytes,
      options,
      tensors: reports,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    // Samples still on a worker when the analysis failed or was cancelled: nobody waits for them.
    for (const sink of sinks) sink.drop();
    // A first chunk read ahead must land before the buffers go back to the pool.
    await Promise.all([...new Set(checkpoint.tensors.map((tensor) => tensor.file))].map((file) => file.settle()));
    scratch.release();
  }
}

// Where the analysis hands a tensor's sampled rows: quantized here, in this thread (`LocalSample`), or
// by a sample worker while this thread reads on (`RemoteSample` in sqnr-workers.ts). Either way the
// rows are quantized in batches of `batchRows` rows, the last one partial, so the totals are the same bits.
import { DTYPE_BYTES, type FloatDtype } from './dtypes.js';
import { SqnrAccumulator, type FloatBuffers, type SampleShape, type SqnrTotals } from './sqnr-sample.js';

export interface SampleSink {
  /** Resolves when the sink can take another chunk's rows (a worker's queue is bounded); rejects when it never will. */
  ready(): Promise<void>;
  /** One sampled row's raw bytes, valid only during the call. */
  row(bytes: Uint8Array): void;
  /** Part of a wide sampled row's raw bytes, starting at a multiple of 128 columns; `endRow` after its last part. */
  segment(bytes: Uint8Array): void;
  endRow(): void;
  /** The totals once every row handed in is quantized; called once, after the last row. */
  finish(): Promise<SqnrTotals>;
  /** The analysis stopped: nothing more comes and nobody waits for the totals. */
  drop(): void;
}

/** Decodes `count` elements of raw bytes to float32 (the analysis's decoder, SIMD where the bytes allow). */
export type Decode = (dtype: FloatDtype, bytes: Uint8Array, out: Float32Array, count: number) => void;

/** The sample quantized in this thread: rows decoded straight from the chunk into the batch. */
export class LocalSample implements SampleSink {
  private readonly accumulator: SqnrAccumulator;
  private pending = 0;

  constructor(
    private readonly shape: SampleShape,
    private readonly dtype: FloatDtype,
    private readonly batchRows: number,
    private readonly decode: Decode,
    private readonly floats: FloatBuffers,
  ) {
    this.accumulator = new SqnrAccumulator(shape);
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }
  row(bytes: Uint8Array): void {
    if (this.pending === this.batchRows) this.flush();
    const { cols } = this.shape;
    const batch = this.floats.get('sample', this.batchRows * cols);
    this.decode(this.dtype, bytes, batch.subarray(this.pending * cols, ++this.pending * cols), cols);
  }
  segment(bytes: Uint8Array): void {
    const count = bytes.byteLength / DTYPE_BYTES[this.dtype];
    const values = this.floats.get('decoded', count);
    this.decode(this.dtype, bytes, values, count);
    this.accumulator.quantizeSegment(values, this.floats.get('rotated', count));
  }
  endRow(): void {
    this.accumulator.endRow();
  }
  finish(): Promise<SqnrTotals> {
    this.flush();
    return Promise.resolve(this.accumulator.totals);
  }
  drop(): void {
    this.pending = 0;
  }
  private flush(): void {
    const length = this.pending * this.shape.cols;
    this.accumulator.quantizeRows(this.floats.get('sample', length), this.pending, this.floats.get('rotated', length));
    this.pending = 0;
  }
}

// Entry point of a sample worker (a Node worker thread, see sqnr-workers.ts): quantizes the SQNR
// samples of the tensors the analysing thread hands it, while that thread reads and counts. Each
// message is done whole before the next: a batch of rows is decoded and quantized at once, so the
// batches are the ones the analysing thread would have quantized itself.
import { parentPort } from 'node:worker_threads';
import { acquireResidentScaleKernels, mxBackendInUse, setMxBackend, type ResidentScaleKernels } from '../mx/index.js';
import { warmUpMxKernels } from '../mx/warm-up.js';
import { decodeInto, DTYPE_BYTES, type FloatDtype } from './dtypes.js';
import { FloatBuffers, SqnrAccumulator, type SampleShape, type SqnrTotals } from './sqnr-sample.js';

export type ToSampleWorker =
  | { type: 'begin'; id: number; shape: SampleShape; dtype: FloatDtype; backend: 'ts' | 'wasm' }
  /** Whole sampled rows (`rows`) or part of one wide row (`segment`): `length` raw bytes at the start of `bytes`, which comes back. */
  | { type: 'rows' | 'segment'; id: number; bytes: ArrayBuffer; length: number }
  | { type: 'endRow' | 'end' | 'drop'; id: number };

export type FromSampleWorker =
  /** Its kernels are compiled: it takes tensors from now on. */
  | { type: 'ready' }
  | { type: 'buffer'; bytes: ArrayBuffer }
  | { type: 'totals'; id: number; totals: SqnrTotals }
  | { type: 'failed'; id: number; message: string };

interface Sample {
  accumulator: SqnrAccumulator;
  shape: SampleShape;
  dtype: FloatDtype;
}

const samples = new Map<number, Sample>();
const floats = new FloatBuffers();
/** The SIMD BF16 decoder, which reads only its own memory: the sampled bytes are copied in first (still about a quarter of the TypeScript loop's time). */
let decoder: ResidentScaleKernels | undefined;

/** Decoding is exact whichever way it runs. */
function decode(dtype: FloatDtype, bytes: Uint8Array, out: Float32Array, count: number): void {
  if (dtype === 'BF16' && decoder) {
    const landing = decoder.buffers(bytes.byteLength)[0].subarray(0, bytes.byteLength);
    landing.set(bytes);
    if (decoder.decodeBf16(new Uint16Array(landing.buffer, landing.byteOffset, count), out)) return;
  }
  decodeInto(dtype, bytes, out, count);
}

function quantize(sample: Sample, kind: 'rows' | 'segment', bytes: Uint8Array): void {
  const count = bytes.byteLength / DTYPE_BYTES[sample.dtype];
  const values = floats.get(kind, count);
  decode(sample.dtype, bytes, values, count);
  if (kind === 'rows') sample.accumulator.quantizeRows(values, count / sample.shape.cols, floats.get('rotated', count));
  else sample.accumulator.quantizeSegment(values, floats.get('rotated', count));
}

function handle(message: ToSampleWorker, post: (reply: FromSampleWorker, transfer?: ArrayBuffer[]) => void): void {
  if (message.type === 'begin') {
    // The analysing thread's kernels, so the statistics are the same bits (both paths are exact, but this is the rule).
    if (mxBackendInUse() !== message.backend) setMxBackend(message.backend);
    samples.set(message.id, { accumulator: new SqnrAccumulator(message.shape), shape: message.shape, dtype: message.dtype });
    return;
  }
  const sample = samples.get(message.id);
  if (message.type === 'rows' || message.type === 'segment') {
    try {
      if (sample) quantize(sample, message.type, new Uint8Array(message.bytes, 0, message.length));
    } finally {
      post({ type: 'buffer', bytes: message.bytes }, [message.bytes]);
    }
  } else if (message.type === 'endRow') {
    sample?.accumulator.endRow();
  } else {
    samples.delete(message.id);
    if (message.type === 'end' && sample) post({ type: 'totals', id: message.id, totals: sample.accumulator.totals });
  }
}

if (parentPort) {
  const port = parentPort;
  // Compiled here once, when the worker starts, not per analysis; and taken to V8's optimizing tier
  // before the first tensor comes (a worker is a new isolate: the analysing thread's tier-up is not
  // shared, and a kernel met cold on a batch of samples runs at the baseline tier throughout).
  setMxBackend('auto');
  warmUpMxKernels();
  decoder = acquireResidentScaleKernels();
  port.postMessage({ type: 'ready' } satisfies FromSampleWorker);
  port.on('message', (message: ToSampleWorker) => {
    try {
      handle(message, (reply, transfer) => port.postMessage(reply, transfer));
    } catch (error) {
      samples.delete(message.id);
      port.postMessage({ type: 'failed', id: message.id, message: (error as Error).message } satisfies FromSampleWorker);
    }
  });
}

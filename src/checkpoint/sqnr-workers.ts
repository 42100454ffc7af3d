// The sample workers: Node worker threads, one fewer than the machine's cores (at most
// MAX_SAMPLE_WORKERS), that quantize the full pass's SQNR samples while the analysing thread reads
// and counts. The sample is most of the full pass's CPU time (four formats on 256 rows per tensor),
// so where a core is free the analysis uses it. Each tensor's sample goes to one worker, whole and
// in order, so its totals are the same bits as in-thread (sample-sink.ts).
//
// Bounded: a worker has at most MAX_IN_FLIGHT buffers of sampled bytes in hand (each at most a
// chunk); the analysis waits before its next chunk while it is behind. A worker that dies fails the
// tensors it held with an error naming them, and the analysis with it; the next one starts afresh.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { mxBackendInUse } from '../mx/index.js';
import { DTYPE_BYTES, type FloatDtype } from './dtypes.js';
import type { SampleSink } from './sample-sink.js';
import type { SampleShape, SqnrTotals } from './sqnr-sample.js';
import type { FromSampleWorker, ToSampleWorker } from './sqnr-worker.js';

/** More would only share the same few cores with the reads and the counting. */
const MAX_SAMPLE_WORKERS = 3;
/** Buffers of sampled bytes a worker may hold: one being quantized, one queued, one being filled. */
export const MAX_IN_FLIGHT = 3;
/**
 * Tensors a worker may hold (one being quantized, one queued) before the analysing thread keeps the
 * next tensor's sample: it quantizes it itself rather than wait. So the work splits by how fast each
 * side goes: evenly on idle cores, nearly all in-thread where the worker gets no core (a busy machine).
 */
const MAX_QUEUED_TENSORS = 2;

let workerCount = Math.max(0, Math.min(MAX_SAMPLE_WORKERS, availableParallelism() - 1));
const workers: SampleWorker[] = [];
let nextId = 1;
/** Why a worker died before it was ready (a broken install): no more are started, analyses run in one thread. */
let startFailure: Error | undefined;

/** How many sample workers full analyses use; 0 quantizes every sample in the analysing thread. Stops workers beyond it. */
export function setSampleWorkers(count: number): void {
  workerCount = count;
  startFailure = undefined;
  for (const worker of workers.splice(count)) void worker.stop();
}

/** Why the sample workers could not start, if they could not (analyses then run in one thread, with the same results). */
export function sampleWorkersUnavailable(): Error | undefined {
  return startFailure;
}

export function sampleWorkerCount(): number {
  return workerCount;
}

/**
 * Starts the sample workers, if not yet running; resolves when they take tensors (their kernels
 * compiled: about 0.1-0.2 s). Until then an analysis quantizes its samples itself, so a worker's
 * start never delays one; starting them early (a checkpoint editor opening) lets the first use them.
 */
export async function startSampleWorkers(): Promise<void> {
  await Promise.all(ensureWorkers().map((worker) => worker.whenStarted()));
}

function ensureWorkers(): SampleWorker[] {
  while (!startFailure && workers.length < workerCount) workers.push(new SampleWorker());
  return workers;
}

/** Stops every sample worker (deactivation); a later full analysis starts new ones. */
export async function stopSampleWorkers(): Promise<void> {
  startFailure = undefined;
  await Promise.all(workers.splice(0).map((worker) => worker.stop()));
}

/** Bytes of sampled rows handed to workers and not yet back, at most, since the last call: the memory bound, for tests. */
export function takeSampleBytesHighWater(): number {
  return Math.max(0, ...workers.map((worker) => worker.takeHighWater()));
}

/**
 * A sink that quantizes one tensor's sample on a worker, or undefined when there are none or all are
 * behind (the caller quantizes it itself). `label` names the tensor in errors ("<file>: tensor "<name>"").
 */
export function remoteSample(label: string, shape: SampleShape, dtype: FloatDtype, batchRows: number): SampleSink | undefined {
  const worker = ensureWorkers().reduce<SampleWorker | undefined>((best, worker) => (worker.load < (best?.load ?? MAX_QUEUED_TENSORS) ? worker : best), undefined);
  return worker && new RemoteSample(worker, label, shape, dtype, batchRows);
}

interface Pending {
  label: string;
  resolve(totals: SqnrTotals): void;
  reject(error: Error): void;
}

/**
 * Bundled, the worker is dist/checkpoint/sqnr-worker.js beside the entry points' folders (dist/host,
 * dist/cli); from source (tests and benches under tsx) its .ts is loaded through tsx's require hook.
 */
function startWorker(): Worker {
  if (!__filename.endsWith('.ts')) return new Worker(join(__dirname, '..', 'checkpoint', 'sqnr-worker.js'));
  return new Worker(`require('tsx/cjs'); require(${JSON.stringify(join(__dirname, 'sqnr-worker.ts'))});`, { eval: true });
}

class SampleWorker {
  private readonly worker = startWorker();
  private readonly pending = new Map<number, Pending>();
  private readonly free: ArrayBuffer[] = [];
  private readonly waiting: { resolve(): void; reject(error: Error): void }[] = [];
  private inFlight = 0;
  private bytesInFlight = 0;
  private highWater = 0;
  private died: Error | undefined;
  private isReady = false;
  private markReady = (): void => undefined;
  /** Resolves when the worker takes tensors; rejects if it dies first. */
  private readonly started = new Promise<void>((resolve, reject) => {
    this.markReady = resolve;
    this.worker.once('exit', (code) => reject(new Error(`the SQNR sample worker exited with code ${code} while starting`)));
  });
  /** Callers of whenStarted still waiting. */
  private startWaiters = 0;

  constructor() {
    this.started.catch(() => undefined);
    this.worker.on('message', (message: FromSampleWorker) => this.receive(message));
    this.worker.on('error', (error) => this.fail(`it threw: ${error.message}`));
    this.worker.on('messageerror', (error) => this.fail(`a message could not be read: ${error.message}`));
    this.worker.on('exit', (code) => this.fail(`it exited with code ${code}`));
    // After the listeners: adding a 'message' listener refs the worker again.
    this.holdProcess();
  }

  /** Resolves when the worker takes tensors (the process is kept alive meanwhile); rejects if it dies first. */
  async whenStarted(): Promise<void> {
    this.startWaiters++;
    this.holdProcess();
    try {
      await this.started;
    } finally {
      this.startWaiters--;
      this.holdProcess();
    }
  }

  /** Tensors it holds (infinite until it is ready or once it died): the next tensor goes to the least loaded worker. */
  get load(): number {
    return this.isReady && !this.died ? this.pending.size : Infinity;
  }

  begin(id: number, pending: Pending, shape: SampleShape, dtype: FloatDtype): void {
    if (this.died) return pending.reject(this.died);
    this.pending.set(id, pending);
    this.holdProcess();
    this.post({ type: 'begin', id, shape, dtype, backend: mxBackendInUse() });
  }

  /** A buffer of at least `bytes` to fill and hand over with `send`: the smallest that came back and fits (fresh pages cost a first touch), else a new one. */
  buffer(bytes: number): ArrayBuffer {
    let best = -1;
    this.free.forEach((buffer, i) => {
      if (buffer.byteLength >= bytes && (best < 0 || buffer.byteLength < this.free[best]!.byteLength)) best = i;
    });
    return best >= 0 ? this.free.splice(best, 1)[0]! : new ArrayBuffer(bytes);
  }

  send(type: 'rows' | 'segment', id: number, bytes: ArrayBuffer, length: number): void {
    if (this.died) return;
    this.inFlight++;
    this.bytesInFlight += bytes.byteLength;
    this.highWater = Math.max(this.highWater, this.bytesInFlight);
    this.post({ type, id, bytes, length }, [bytes]);
  }

  post(message: ToSampleWorker, transfer?: ArrayBuffer[]): void {
    if (!this.died) this.worker.postMessage(message, transfer);
  }

  ready(): Promise<void> {
    if (this.died) return Promise.reject(this.died);
    if (this.inFlight < MAX_IN_FLIGHT - 1) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /** Forgets a tensor (its analysis stopped): the worker drops it, and nobody waits for it. */
  forget(id: number): void {
    if (!this.pending.delete(id)) return;
    this.post({ type: 'drop', id });
    this.holdProcess();
  }

  takeHighWater(): number {
    const high = this.highWater;
    this.highWater = this.bytesInFlight;
    return high;
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }

  private receive(message: FromSampleWorker): void {
    if (message.type === 'ready') {
      this.isReady = true;
      this.markReady();
      return;
    }
    if (message.type === 'buffer') {
      this.inFlight--;
      this.bytesInFlight -= message.bytes.byteLength;
      if (this.free.length < MAX_IN_FLIGHT) this.free.push(message.bytes);
      if (this.inFlight < MAX_IN_FLIGHT - 1) for (const waiter of this.waiting.splice(0)) waiter.resolve();
      return;
    }
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.forget(message.id);
    if (message.type === 'totals') pending.resolve(message.totals);
    else pending.reject(new Error(`${pending.label}: SQNR sample failed: ${message.message}`));
  }

  private fail(why: string): void {
    if (this.died) return;
    this.died = new Error(`the SQNR sample worker stopped (${why}); analyse again to start a new one`);
    const index = workers.indexOf(this);
    if (index >= 0) workers.splice(index, 1);
    if (index >= 0 && !this.isReady) startFailure = new Error(`the SQNR sample worker did not start (${why})`);
    for (const { label, reject } of this.pending.values()) reject(new Error(`${label}: ${this.died.message}`));
    this.pending.clear();
    for (const waiter of this.waiting.splice(0)) waiter.reject(this.died);
    this.holdProcess();
  }

  /** Only tensors waiting for their totals, or callers waiting for the start, keep the process alive: an idle worker never does. */
  private holdProcess(): void {
    if (!this.died && (this.pending.size > 0 || this.startWaiters > 0)) this.worker.ref();
    else this.worker.unref();
  }
}

/** One tensor's sample on a worker: sampled rows are copied into batches of `batchRows` rows and sent whole. */
class RemoteSample implements SampleSink {
  private readonly id = nextId++;
  private readonly rowBytes: number;
  private readonly totals: Promise<SqnrTotals>;
  private batch: Uint8Array | undefined;
  private rows = 0;

  constructor(
    private readonly worker: SampleWorker,
    private readonly label: string,
    shape: SampleShape,
    dtype: FloatDtype,
    private readonly batchRows: number,
  ) {
    this.rowBytes = shape.cols * DTYPE_BYTES[dtype];
    this.totals = new Promise((resolve, reject) => worker.begin(this.id, { label, resolve, reject }, shape, dtype));
    // Awaited by finish(); a failure before then must not count as unhandled.
    this.totals.catch(() => undefined);
  }

  async ready(): Promise<void> {
    try {
      await this.worker.ready();
    } catch (error) {
      throw new Error(`${this.label}: ${(error as Error).message}`);
    }
  }
  row(bytes: Uint8Array): void {
    this.batch ??= new Uint8Array(this.worker.buffer(this.batchRows * this.rowBytes));
    this.batch.set(bytes, this.rows * this.rowBytes);
    if (++this.rows === this.batchRows) this.sendRows();
  }
  segment(bytes: Uint8Array): void {
    const buffer = this.worker.buffer(bytes.byteLength);
    new Uint8Array(buffer).set(bytes);
    this.worker.send('segment', this.id, buffer, bytes.byteLength);
  }
  endRow(): void {
    this.worker.post({ type: 'endRow', id: this.id });
  }
  finish(): Promise<SqnrTotals> {
    if (this.rows > 0) this.sendRows();
    this.worker.post({ type: 'end', id: this.id });
    return this.totals;
  }
  drop(): void {
    this.worker.forget(this.id);
  }
  private sendRows(): void {
    this.worker.send('rows', this.id, this.batch!.buffer as ArrayBuffer, this.rows * this.rowBytes);
    this.batch = undefined;
    this.rows = 0;
  }
}

// Telemetry to a client that reads batch frames (protocol 1.4). A trainer publishes a stats step's
// hundreds of records in one synchronous pass; sent one frame each, the client paid its websocket,
// stream and event-loop overhead once per record (bench/ingest: about as much CPU as the record's
// own JSON.parse). Frames queued in one tick leave at its end as one batch frame, so no record
// waits past the pass that published it: a lone record waits microseconds, never a timer.
import { MAX_BATCH_BYTES, MAX_BATCH_RECORDS } from '../protocol/index.js';
import { batchFrame } from './frames.js';

/** `[`, `]` and each record's `,\n`. */
const BATCH_OVERHEAD_BYTES = 2;
const SEPARATOR_BYTES = 2;

export class BatchSender {
  private frames: Buffer[] = [];
  private bytes = BATCH_OVERHEAD_BYTES;

  /** `send` gets a lone record's own frame, or a batch frame of several. */
  constructor(private readonly send: (frame: Buffer) => void) {}

  /** Queues the frame of the next telemetry seq. */
  add(frame: Buffer): void {
    const full = this.frames.length === MAX_BATCH_RECORDS || this.bytes + frame.length + SEPARATOR_BYTES > MAX_BATCH_BYTES;
    if (full) this.flush();
    if (this.frames.length === 0) process.nextTick(() => this.flush());
    this.frames.push(frame);
    this.bytes += frame.length + SEPARATOR_BYTES;
  }

  /** Sends what is queued now; a control message calls it first, so it never overtakes telemetry. */
  flush(): void {
    if (this.frames.length === 0) return;
    const frames = this.frames;
    this.frames = [];
    this.bytes = BATCH_OVERHEAD_BYTES;
    this.send(frames.length === 1 ? frames[0]! : batchFrame(frames));
  }
}

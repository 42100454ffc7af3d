// Numbering and replay: every telemetry record gets the next seq and is kept as a ready-to-send
// frame in byte-bounded memory; seqs older than memory are read back from the runs' logs.
import type { TelemetryRecord } from '../protocol/index.js';
import { readRunLogLines } from '../runlog/index.js';
import { telemetryFrame } from './frames.js';
import { ReplayBuffer } from './replay-buffer.js';

export class TelemetrySequence {
  private last = 0;
  private readonly replay: ReplayBuffer;
  /** Every run of this session: its records are seqs firstSeq… up to the next run's firstSeq. */
  private readonly runs: { firstSeq: number; dir: string | undefined }[] = [];

  constructor(
    replayBytes: number,
    private readonly log: (line: string) => void,
  ) {
    this.replay = new ReplayBuffer(replayBytes);
  }

  /** Seq of the newest record (0 before the first). */
  get lastSeq(): number {
    return this.last;
  }

  /** Seq of the oldest frame memory holds (lastSeq + 1 when it holds none). */
  get oldestInMemory(): number {
    return this.replay.oldestSeq;
  }

  /** A run whose first record will get `firstSeq` logs every record it emits, in order, to `dir`. */
  addRun(firstSeq: number, dir: string | undefined): void {
    this.runs.push({ firstSeq, dir });
  }

  /** Numbers a record and returns its frame. `json` is the record already encoded (for its run log), reused here. */
  append(record: TelemetryRecord, json?: string): string {
    const frame = telemetryFrame(record, ++this.last, json);
    this.replay.push(frame);
    return frame;
  }

  /** Frames from seq `from` on that memory holds, oldest first. */
  framesFrom(from: number): Iterable<string> {
    return this.replay.from(from);
  }

  /**
   * Sends the frames from `from` that memory no longer holds, from the run logs, until memory
   * covers the rest (it may drop more while the logs are read, hence the loop). Returns the seq to
   * continue from in memory; below oldestInMemory when a gap could not be filled.
   */
  async replayFromLogs(from: number, send: (frame: string) => void, isOpen: () => boolean): Promise<number> {
    let cursor = from;
    while (cursor < this.replay.oldestSeq) {
      const next = await this.replayRun(cursor, this.replay.oldestSeq, send, isOpen);
      if (next === cursor) break;
      cursor = next;
    }
    return cursor;
  }

  /** Sends the logged records with seqs in [from, until) of the run holding `from`; returns the seq after the last sent. */
  private async replayRun(from: number, until: number, send: (frame: string) => void, isOpen: () => boolean): Promise<number> {
    let index = this.runs.length - 1;
    while (index >= 0 && this.runs[index]!.firstSeq > from) index--;
    const run = this.runs[index];
    if (!run?.dir) return from;
    const end = Math.min(until, this.runs[index + 1]?.firstSeq ?? until);
    let seq = run.firstSeq;
    let next = from;
    await readRunLogLines(run.dir, (record) => {
      if (seq >= from && seq < end && isOpen()) {
        send(telemetryFrame(record, seq));
        next = seq + 1;
      }
      seq++;
    }).catch((error: unknown) => this.log(`replay from ${run.dir} failed: ${(error as Error).message}`));
    return next;
  }
}

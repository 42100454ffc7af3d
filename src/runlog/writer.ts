// Append-only writer for one run directory. Records are buffered and written with one synchronous
// append per `flush()` (the trainer flushes once per step), so a killed trainer loses at most the
// step in flight and leaves at worst one torn last line, which the reader skips.
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { RunStartedRecord, TelemetryRecord } from '../protocol/telemetry.js';
import { CHECKPOINTS_DIR, RUN_JSON, TELEMETRY_NDJSON } from './format.js';

export class RunLogWriter {
  private fd: number | undefined;
  private pending: string[] = [];

  /** Creates `dir` (and its checkpoints folder), writes run.json and the first telemetry line. */
  constructor(
    readonly dir: string,
    started: RunStartedRecord,
  ) {
    mkdirSync(join(dir, CHECKPOINTS_DIR), { recursive: true });
    writeFileSync(join(dir, RUN_JSON), `${JSON.stringify(started, null, 2)}\n`);
    this.fd = openSync(join(dir, TELEMETRY_NDJSON), 'a');
    this.append(started);
    this.flush();
  }

  /** `json`: the record as JSON.stringify wrote it, when the caller encoded it already. */
  append(record: TelemetryRecord, json = JSON.stringify(record)): void {
    if (this.fd === undefined) throw new Error(`run log ${this.dir} is closed; no more records can be appended`);
    this.pending.push(`${json}\n`);
  }

  flush(): void {
    if (this.fd === undefined || this.pending.length === 0) return;
    writeSync(this.fd, this.pending.join(''));
    this.pending = [];
  }

  close(): void {
    this.flush();
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

// A run-log directory → the store, as "Open Run Log" does it. A log that stops without runEnded
// (a killed trainer) is not a running run: it ends up `interrupted` ("ended without runEnded").
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readRunLogLines, TELEMETRY_NDJSON } from '../runlog/index.js';
import type { RunStore } from './run-store.js';

/** A log full of refused records names the first few, then counts the rest. */
const MAX_REFUSALS_LISTED = 10;

export interface LoadedRunLog {
  records: number;
  /** One per skipped line, naming the file and line. */
  warnings: string[];
  runIds: string[];
}

/** Streams `dir`'s telemetry into `store` as a loaded run; `onProgress` gets the record count every `every` records. */
export async function loadRunLog(store: RunStore, dir: string, onProgress?: (records: number) => void, every = 5000): Promise<LoadedRunLog> {
  const runIds = new Set<string>();
  let count = 0;
  const refusals: string[] = [];
  let refused = 0;
  const { records, warnings } = await readRunLogLines(dir, (record) => {
    const refusal = store.ingest(record, 'loaded', dir);
    if (refusal !== undefined && ++refused <= MAX_REFUSALS_LISTED) refusals.push(`${dir}: ${refusal}`);
    runIds.add(record.runId);
    if (++count % every === 0) onProgress?.(count);
  });
  warnings.push(...refusals);
  if (refused > MAX_REFUSALS_LISTED) warnings.push(`${dir}: ${refused - MAX_REFUSALS_LISTED} more records refused`);
  for (const runId of runIds) store.markOrphaned('loaded', runId);
  return { records, warnings, runIds: [...runIds] };
}

/** `dir` itself when it is a run directory, else its sub-directories that are (a trainer's out dir). */
export function runLogDirs(dir: string): string[] {
  if (existsSync(join(dir, TELEMETRY_NDJSON))) return [dir];
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(dir, entry.name, TELEMETRY_NDJSON)))
    .map((entry) => join(dir, entry.name))
    .sort();
}

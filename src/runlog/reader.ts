// Reads a run directory's telemetry.ndjson back. Every line is validated; a torn or invalid line is
// skipped with a warning naming its line number, and every other record is kept.
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { MAX_JSON_DEPTH, withinDepth } from '../protocol/json-depth.js';
import { tryCheck } from '../protocol/validate.js';
import { telemetryRecordSchema, type TelemetryRecord } from '../protocol/telemetry.js';
import { TELEMETRY_NDJSON } from './format.js';

export interface RunLogSummary {
  records: number;
  warnings: string[];
}

/** Streams the records of `dir`'s telemetry.ndjson to `onRecord` in file order (for big logs). */
export async function readRunLogLines(dir: string, onRecord: (record: TelemetryRecord) => void): Promise<RunLogSummary> {
  const path = join(dir, TELEMETRY_NDJSON);
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  const warnings: string[] = [];
  let lineNumber = 0;
  let records = 0;
  for await (const line of lines) {
    lineNumber++;
    if (line.trim() === '') continue;
    if (!withinDepth(line)) {
      warnings.push(`${path} line ${lineNumber}: nests JSON deeper than ${MAX_JSON_DEPTH} levels (a record nests at most 5); skipped`);
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      warnings.push(`${path} line ${lineNumber}: not valid JSON (a torn write from a killed trainer?); skipped`);
      continue;
    }
    const checked = tryCheck(telemetryRecordSchema, parsed);
    if (!checked.ok) {
      warnings.push(`${path} line ${lineNumber}: ${checked.error.message}; skipped`);
      continue;
    }
    records++;
    onRecord(checked.value);
  }
  return { records, warnings };
}

/** Every valid record of a run directory, in file order, plus one warning per skipped line. */
export async function readRunLog(dir: string): Promise<{ records: TelemetryRecord[]; warnings: string[] }> {
  const records: TelemetryRecord[] = [];
  const { warnings } = await readRunLogLines(dir, (record) => records.push(record));
  return { records, warnings };
}

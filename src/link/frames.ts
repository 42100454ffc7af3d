// Reading and writing protocol v1 frames. Reading never throws: every problem becomes a reply the
// peer can act on (the error code and a message naming what was wrong), and the connection lives.
import { isAscii, isUtf8 } from 'node:buffer';
import type { RawData } from 'ws';
import { hasUnknownType, tryCheck, type ErrorCode, type Schema, type TelemetryRecord } from '../protocol/index.js';
import { MAX_JSON_DEPTH, withinDepth } from '../protocol/json-depth.js';
import { MAX_BATCH_RECORDS } from '../protocol/wire.js';

/** What one message (a frame, or one record of a batch frame) reads as. */
export type InboundMessage<T> =
  | { kind: 'message'; message: T }
  | { kind: 'unknown'; type: string }
  | { kind: 'error'; code: ErrorCode; message: string; id?: string };

/** A batch frame (protocol 1.4): its records in order, each read as its own frame would be. */
export type InboundFrame<T> = InboundMessage<T> | { kind: 'batch'; records: InboundMessage<T>[] };

function byteLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((sum, chunk) => sum + chunk.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

function bytes(data: RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  return data instanceof ArrayBuffer ? Buffer.from(data) : data;
}

/**
 * The frame's text, or undefined when its bytes are not UTF-8. The client turns off ws's own UTF-8
 * check (which would close the connection) because this one replaces it: an ASCII frame (almost
 * every frame: numbers, names, keys) is proved so by one native pass and decoded as latin1, byte for
 * byte, with no second UTF-8 pass in the decoder; anything else is checked as UTF-8, then decoded.
 */
function frameText(buffer: Buffer): string | undefined {
  if (isAscii(buffer)) return buffer.toString('latin1');
  return isUtf8(buffer) ? buffer.toString('utf8') : undefined;
}

/**
 * Reads one frame. `batchRecord`: the schema of one record of a batch frame, for a reader that
 * takes batches (a client); without it a frame that is a JSON array is refused as before.
 */
export function readFrame<T>(data: RawData, isBinary: boolean, schema: Schema<T>, knownTypes: readonly string[], maxBytes: number): InboundMessage<T>;
export function readFrame<T>(data: RawData, isBinary: boolean, schema: Schema<T>, knownTypes: readonly string[], maxBytes: number, batchRecord: Schema<T>): InboundFrame<T>;
export function readFrame<T>(data: RawData, isBinary: boolean, schema: Schema<T>, knownTypes: readonly string[], maxBytes: number, batchRecord?: Schema<T>): InboundFrame<T> {
  const size = byteLength(data);
  if (size > maxBytes) return { kind: 'error', code: 'frame-too-large', message: `frame of ${size} bytes is over the ${maxBytes}-byte limit; dropped` };
  if (isBinary) return { kind: 'error', code: 'invalid-message', message: 'binary frame dropped: protocol v1 frames are JSON text' };
  const text = frameText(bytes(data));
  if (text === undefined) return { kind: 'error', code: 'bad-json', message: 'frame is not valid UTF-8 (protocol v1 frames are UTF-8 JSON text); dropped' };
  if (batchRecord && text.charCodeAt(0) === OPEN_ARRAY) return readBatch(text, batchRecord, knownTypes);
  return readMessage(text, schema, knownTypes, 'frame', MAX_JSON_DEPTH);
}

/** `what` names the text in errors: "frame", or the record's place in a batch. */
function readMessage<T>(text: string, schema: Schema<T>, knownTypes: readonly string[], what: string, depth: number): InboundMessage<T> {
  if (!withinDepth(text, depth)) return { kind: 'error', code: 'bad-json', message: `${what} nests JSON deeper than ${MAX_JSON_DEPTH} levels (protocol v1 messages nest at most 5, one more in a batch); dropped` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { kind: 'error', code: 'bad-json', message: `${what} is not valid JSON (${(error as Error).message}); dropped` };
  }
  if (hasUnknownType(parsed, knownTypes)) return { kind: 'unknown', type: parsed.type };
  const checked = tryCheck(schema, parsed);
  if (checked.ok) return { kind: 'message', message: checked.value };
  const id = (parsed as { id?: unknown } | null)?.id;
  return { kind: 'error', code: 'invalid-message', message: `${what === 'frame' ? '' : `${what}: `}${checked.error.message}; message dropped`, ...(typeof id === 'string' ? { id } : {}) };
}

const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
/** How a record's frame starts (telemetryFrame writes seq first): names the seq of a record that does not parse. */
const LEADING_SEQ = /^\{"seq":(\d{1,16})[,}]/;

/**
 * A batch frame's records, split at its line ends: JSON text holds no raw line feed inside a
 * string, so each line of a well-formed batch is one whole record (and its comma). Each line is
 * then read as a frame of its own, depth-checked one level shallower: a bad record is dropped alone,
 * and no JSON.parse ever sees more than one record's text.
 */
function readBatch<T>(text: string, schema: Schema<T>, knownTypes: readonly string[]): InboundFrame<T> {
  const dropped = (why: string): InboundFrame<T> => ({ kind: 'error', code: 'bad-json', message: `batch frame ${why}; dropped whole` });
  if (text.length < 2 || text.charCodeAt(text.length - 1) !== CLOSE_ARRAY) return dropped("does not end with ']' (a batch is a JSON array of records, one per line)");
  if (text.length === 2) return { kind: 'batch', records: [] };
  const lines: string[] = [];
  for (let start = 1; ; ) {
    if (lines.length === MAX_BATCH_RECORDS) return dropped(`holds more than ${MAX_BATCH_RECORDS} records`);
    const end = text.indexOf('\n', start);
    if (end === -1) {
      lines.push(text.slice(start, text.length - 1));
      break;
    }
    // A line that does not end with its comma is not one whole record: left so, it fails to parse.
    lines.push(text.slice(start, text.charCodeAt(end - 1) === COMMA ? end - 1 : end));
    start = end + 1;
  }
  const records = lines.map((line, index) => {
    const seq = LEADING_SEQ.exec(line)?.[1];
    const what = `record ${index + 1} of ${lines.length} in a batch frame (${seq ? `seq ${seq}` : 'no seq'})`;
    return readMessage(line, schema, knownTypes, what, MAX_JSON_DEPTH - 1);
  });
  return { kind: 'batch', records };
}

/** A batch frame of records' frames (each as `telemetryFrame` wrote it), in seq order. */
export function batchFrame(frames: readonly Buffer[]): Buffer {
  const parts: Buffer[] = [OPEN_BRACKET];
  for (const frame of frames) parts.push(frame, RECORD_SEPARATOR);
  parts[parts.length - 1] = CLOSE_BRACKET; // the last separator; frames is never empty
  return Buffer.concat(parts);
}
const OPEN_BRACKET = Buffer.from('[');
const CLOSE_BRACKET = Buffer.from(']');
const RECORD_SEPARATOR = Buffer.from(',\n');

/**
 * A telemetry record as a frame with `seq` first, without copying the record. `json`: the record
 * as JSON.stringify wrote it, when the caller has it already (a trainer encodes each record once,
 * for its run log and for this frame).
 */
export function telemetryFrame(record: TelemetryRecord, seq: number, json = JSON.stringify(record)): string {
  return `{"seq":${seq},${json.slice(1)}`;
}

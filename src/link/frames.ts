// Reading and writing protocol v1 frames. Reading never throws: every problem becomes a reply the
// peer can act on (the error code and a message naming what was wrong), and the connection lives.
import { isAscii, isUtf8 } from 'node:buffer';
import type { RawData } from 'ws';
import { hasUnknownType, tryCheck, type ErrorCode, type Schema, type TelemetryRecord } from '../protocol/index.js';
import { MAX_JSON_DEPTH, withinDepth } from '../protocol/json-depth.js';

export type InboundFrame<T> =
  | { kind: 'message'; message: T }
  | { kind: 'unknown'; type: string }
  | { kind: 'error'; code: ErrorCode; message: string; id?: string };

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

/** Why a frame of `size` bytes was dropped. */
export function frameTooLarge(size: number, maxBytes: number): string {
  return `frame of ${size} bytes is over the ${maxBytes}-byte limit; dropped`;
}

export function readFrame<T>(data: RawData, isBinary: boolean, schema: Schema<T>, knownTypes: readonly string[], maxBytes: number): InboundFrame<T> {
  const size = byteLength(data);
  if (size > maxBytes) return { kind: 'error', code: 'frame-too-large', message: frameTooLarge(size, maxBytes) };
  if (isBinary) return { kind: 'error', code: 'invalid-message', message: 'binary frame dropped: protocol v1 frames are JSON text' };
  const text = frameText(bytes(data));
  if (text === undefined) return { kind: 'error', code: 'bad-json', message: 'frame is not valid UTF-8 (protocol v1 frames are UTF-8 JSON text); dropped' };
  if (!withinDepth(text)) return { kind: 'error', code: 'bad-json', message: `frame nests JSON deeper than ${MAX_JSON_DEPTH} levels (protocol v1 messages nest at most 5); dropped` };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { kind: 'error', code: 'bad-json', message: `frame is not valid JSON (${(error as Error).message}); dropped` };
  }
  if (hasUnknownType(parsed, knownTypes)) return { kind: 'unknown', type: parsed.type };
  const checked = tryCheck(schema, parsed);
  if (checked.ok) return { kind: 'message', message: checked.value };
  const id = (parsed as { id?: unknown } | null)?.id;
  return { kind: 'error', code: 'invalid-message', message: `${checked.error.message}; message dropped`, ...(typeof id === 'string' ? { id } : {}) };
}

/**
 * A telemetry record as a frame with `seq` first, without copying the record. `json`: the record
 * as JSON.stringify wrote it, when the caller has it already (a trainer encodes each record once,
 * for its run log and for this frame).
 */
export function telemetryFrame(record: TelemetryRecord, seq: number, json = JSON.stringify(record)): string {
  return `{"seq":${seq},${json.slice(1)}`;
}

// The safetensors header: an 8-byte little-endian length N, then N bytes of JSON, then the data.
// Validation follows the reference implementation (huggingface/safetensors): tensors must tile the
// data section exactly (no overlaps, gaps or trailing bytes), and every tensor's byte range must
// match its dtype and shape. Parsing cost is bounded before JSON.parse runs: the header size is
// capped (below) and so is its nesting (MAX_JSON_DEPTH; a real header nests 3 levels).
import { MAX_JSON_DEPTH, withinDepth } from '../protocol/json-depth.js';
import { DTYPE_BYTES, isDtype, type Dtype } from './dtypes.js';

/**
 * Larger headers are refused before they are read. Real ones are far smaller: about 100 bytes per
 * tensor, so a Llama-3-8B shard (≈ 100 tensors) has ≈ 10 KB and even 100,000 tensors in one file
 * would be ≈ 10 MB. The reference implementation allows 100 MB, which costs seconds and GBs to parse
 * in a VS Code editor opened by a mere click; docs/checkpoints.md says why 16 MiB.
 */
export const MAX_HEADER_BYTES = 16 * 1024 * 1024;
export const HEADER_LENGTH_BYTES = 8;

/** A file that is not a valid safetensors checkpoint; the message names the file and the problem. */
export class CheckpointFormatError extends Error {
  constructor(
    readonly file: string,
    readonly problem: string,
  ) {
    super(`${file}: ${problem}`);
    this.name = 'CheckpointFormatError';
  }
}

export interface TensorInfo {
  name: string;
  dtype: Dtype;
  shape: number[];
  elements: number;
  /** Offset of the tensor's first byte from the start of the file. */
  fileOffset: number;
  byteLength: number;
}

export interface SafetensorsHeader {
  metadata: Record<string, string>;
  /** In data order (ascending offset). */
  tensors: TensorInfo[];
  /** Where the data section starts: 8 + the header length. */
  dataOffset: number;
}

/** Reads N from the first 8 bytes and checks it against the cap and the file's size. */
export function parseHeaderLength(prefix: Uint8Array, fileSize: number, file: string): number {
  if (fileSize < HEADER_LENGTH_BYTES || prefix.byteLength < HEADER_LENGTH_BYTES) {
    throw new CheckpointFormatError(file, `file is ${fileSize} bytes, too short for the 8-byte header length`);
  }
  const length = new DataView(prefix.buffer, prefix.byteOffset, HEADER_LENGTH_BYTES).getBigUint64(0, true);
  if (length > BigInt(MAX_HEADER_BYTES)) {
    throw new CheckpointFormatError(file, `header length ${length} bytes exceeds the ${MAX_HEADER_BYTES}-byte limit (not a safetensors file, or a hostile one)`);
  }
  if (length > BigInt(fileSize - HEADER_LENGTH_BYTES)) {
    throw new CheckpointFormatError(file, `header length ${length} bytes runs past the end of the file (${fileSize} bytes): truncated or not a safetensors file`);
  }
  return Number(length);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonNegativeSafeInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function parseMetadata(value: unknown, file: string): Record<string, string> {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw new CheckpointFormatError(file, '"__metadata__" must be an object of string values');
  for (const [key, entry] of Object.entries(value)) {
    if (typeof entry !== 'string') throw new CheckpointFormatError(file, `"__metadata__"."${key}" must be a string, got ${JSON.stringify(entry)}`);
  }
  return value as Record<string, string>;
}

interface RawEntry {
  name: string;
  dtype: Dtype;
  shape: number[];
  begin: number;
  end: number;
}

function parseEntry(name: string, value: unknown, file: string): RawEntry {
  const where = `tensor "${name}"`;
  if (!isPlainObject(value)) throw new CheckpointFormatError(file, `${where}: entry must be an object with dtype, shape and data_offsets`);
  const { dtype, shape, data_offsets: offsets } = value;
  if (typeof dtype !== 'string' || !isDtype(dtype)) {
    throw new CheckpointFormatError(file, `${where}: unsupported dtype ${JSON.stringify(dtype)} (known: ${Object.keys(DTYPE_BYTES).join(', ')})`);
  }
  if (!Array.isArray(shape) || !shape.every(isNonNegativeSafeInt)) {
    throw new CheckpointFormatError(file, `${where}: shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isNonNegativeSafeInt)) {
    throw new CheckpointFormatError(file, `${where}: data_offsets must be [begin, end] non-negative integers, got ${JSON.stringify(offsets)}`);
  }
  const [begin, end] = offsets as number[];
  if (end < begin) throw new CheckpointFormatError(file, `${where}: data_offsets [${begin}, ${end}] end before they begin`);
  return { name, dtype, shape: shape as number[], begin, end };
}

function elementCount(entry: RawEntry, file: string): number {
  let elements = 1;
  for (const dim of entry.shape) {
    elements *= dim;
    if (!Number.isSafeInteger(elements)) throw new CheckpointFormatError(file, `tensor "${entry.name}": shape [${entry.shape.join(', ')}] has too many elements`);
  }
  return elements;
}

/**
 * Parses and validates the JSON header. `dataLength` is the size of the data section (file size
 * minus 8 minus the header length): every tensor must lie inside it and together they must fill it.
 */
export function parseHeader(headerBytes: Uint8Array, dataLength: number, file: string): SafetensorsHeader {
  const notJson = (error: unknown) => new CheckpointFormatError(file, `header is not valid UTF-8 JSON (${(error as Error).message})`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(headerBytes);
  } catch (error) {
    throw notJson(error);
  }
  if (!withinDepth(text)) throw new CheckpointFormatError(file, `header nests JSON deeper than ${MAX_JSON_DEPTH} levels (a safetensors header nests 3): not a safetensors file, or a hostile one`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw notJson(error);
  }
  if (!isPlainObject(json)) throw new CheckpointFormatError(file, 'header must be a JSON object mapping tensor names to entries');

  const metadata = parseMetadata(json.__metadata__, file);
  const entries = Object.entries(json)
    .filter(([name]) => name !== '__metadata__')
    .map(([name, value]) => parseEntry(name, value, file))
    .sort((a, b) => a.begin - b.begin || a.end - b.end);

  const dataOffset = HEADER_LENGTH_BYTES + headerBytes.byteLength;
  const tensors: TensorInfo[] = [];
  let expectedBegin = 0;
  let previous: RawEntry | undefined;
  for (const entry of entries) {
    const range = `[${entry.begin}, ${entry.end}]`;
    if (entry.end > dataLength) {
      throw new CheckpointFormatError(file, `tensor "${entry.name}": data_offsets ${range} point outside the data section (${dataLength} bytes)`);
    }
    if (entry.begin < expectedBegin && previous) {
      throw new CheckpointFormatError(file, `tensor "${entry.name}": data_offsets ${range} overlap tensor "${previous.name}" [${previous.begin}, ${previous.end}]`);
    }
    if (entry.begin > expectedBegin) {
      throw new CheckpointFormatError(file, `tensor "${entry.name}": data_offsets ${range} leave bytes ${expectedBegin}..${entry.begin} unused (tensors must tile the data section)`);
    }
    const elements = elementCount(entry, file);
    const byteLength = entry.end - entry.begin;
    const expectedBytes = elements * DTYPE_BYTES[entry.dtype];
    if (byteLength !== expectedBytes) {
      throw new CheckpointFormatError(
        file,
        `tensor "${entry.name}": ${entry.dtype} shape [${entry.shape.join(', ')}] needs ${expectedBytes} bytes but data_offsets ${range} hold ${byteLength}`,
      );
    }
    tensors.push({ name: entry.name, dtype: entry.dtype, shape: entry.shape, elements, fileOffset: dataOffset + entry.begin, byteLength });
    expectedBegin = entry.end;
    previous = entry;
  }
  if (expectedBegin !== dataLength) {
    throw new CheckpointFormatError(file, `data section is ${dataLength} bytes but the tensors cover only ${expectedBegin}: truncated header or trailing bytes`);
  }
  return { metadata, tensors, dataOffset };
}

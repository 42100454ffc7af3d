// A layerStats record as one row of float64s, and back. The store keeps each (layer, GEMM) history
// as rows in one Float64Array instead of a dozen objects and arrays per record: at 20,000
// records/s, copying retained records between GC generations cost more than parsing them. A row
// decodes to a record deep-equal to the one encoded (same fields, same values, -0 and all); a record
// the row cannot hold exactly (an unknown extra field, an unvalidated odd shape) is refused, and the
// caller keeps that record as it is.
import { PRECISIONS, type GemmKind, type Precision } from '../protocol/config.js';
import { GEMM_OPERANDS, SCALE_KINDS, STATS_FORMATS, type LayerStatsRecord, type OperandStats, type ScaleHistogram, type WgradError } from '../protocol/telemetry.js';

// Row layout: length, seq (NaN when absent: records from a live link carry their frame's), step,
// precision, simulated, hasWgradError; per operand (two, in GEMM_OPERANDS
// order) format, blockSize, kernel, blocks, elements, kind, minExp, nanBlocks, saturatedFrac,
// flushedFrac, sqnrDb, counts (length, then the values as 32-bit integers, two to a slot); then the
// wgradError's numbers and its sketches. Absent optional fields are 0, others 1 + their index; null
// numbers are NaN. HEADER, OPERAND and WGRAD_SLOT below name the slots for the readers.
const WGRAD_NUMBERS = ['gradNorm', 'errNorm', 'relErr', 'cosErrGrad', 'alignment', 'gradToErr', 'lag1Cos'] as const;
/** Of WGRAD_NUMBERS, these may be null (stored as NaN; a NaN number is refused so it cannot be mistaken for one). */
const WGRAD_NULLABLE = new Set<string>(['relErr', 'cosErrGrad', 'alignment', 'gradToErr', 'lag1Cos']);

class Refused extends Error {}
const refused = new Refused();

/**
 * Histogram counts below this are kept as 32-bit integers, two to a float64 slot: a third of a
 * GEMM's row and two thirds of an fprop or dgrad row were counts, and filling a run's slabs costs
 * mostly the fresh pages it touches. Below 2^30 the word that is a slot's high half never makes a
 * NaN, so no copy of the slot as a number can change its bits.
 */
const MAX_PACKED_COUNT = 2 ** 30;

/** Grows as needed; one per process, reused for every record. */
class RowWriter {
  buffer = new Float64Array(512);
  /** The same memory as 32-bit words. */
  words = new Uint32Array(this.buffer.buffer);
  length = 0;

  reset(): void {
    this.length = 0;
  }
  private room(n: number): void {
    if (this.length + n <= this.buffer.length) return;
    const grown = new Float64Array(Math.max(this.buffer.length * 2, this.length + n));
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
    this.words = new Uint32Array(grown.buffer);
  }
  put(value: number): void {
    this.room(1);
    this.buffer[this.length++] = value;
  }
  number(value: unknown): void {
    if (typeof value !== 'number') throw refused;
    this.put(value);
  }
  nullable(value: unknown): void {
    if (value === null) this.put(NaN);
    else if (typeof value === 'number' && !Number.isNaN(value)) this.put(value);
    else throw refused;
  }
  /** 0 absent, 1 + index in `allowed`. */
  code(value: unknown, allowed: readonly unknown[]): void {
    if (value === undefined) return this.put(0);
    const index = allowed.indexOf(value);
    if (index < 0) throw refused;
    this.put(index + 1);
  }
  /** Non-negative integers below MAX_PACKED_COUNT (not -0): the length, then two values to a slot. */
  counts(values: unknown): void {
    if (!Array.isArray(values)) throw refused;
    const slots = countSlots(values.length);
    this.room(slots + 1);
    this.buffer[this.length++] = values.length;
    const words = this.words;
    const first = 2 * this.length;
    for (let i = 0; i < values.length; i++) {
      const value: unknown = values[i];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value >= MAX_PACKED_COUNT || Object.is(value, -0)) throw refused;
      words[first + i] = value;
    }
    if (values.length % 2 === 1) words[first + values.length] = 0;
    this.length += slots;
  }
  numbers(values: unknown): void {
    if (!Array.isArray(values)) throw refused;
    this.room(values.length + 1);
    this.buffer[this.length++] = values.length;
    for (let i = 0; i < values.length; i++) {
      const value: unknown = values[i];
      if (typeof value !== 'number') throw refused;
      this.buffer[this.length++] = value;
    }
  }
}

export const BOOLEANS = [false, true] as const;

/** The object has no own keys beyond `present` of the known ones (whose values are not undefined). */
function noExtraKeys(value: object, present: number): void {
  if (Object.keys(value).length !== present) throw refused;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function writeOperand(out: RowWriter, operand: unknown, expected: string): void {
  if (!isObject(operand) || operand.operand !== expected) throw refused;
  const histogram = operand.histogram;
  if (!isObject(histogram)) throw refused;
  noExtraKeys(operand, 7 + +(operand.format !== undefined) + +(operand.blockSize !== undefined) + +(operand.kernel !== undefined));
  noExtraKeys(histogram, 3 + +(histogram.kind !== undefined));
  out.code(operand.format, STATS_FORMATS);
  if (operand.blockSize === undefined) out.put(0);
  else if (typeof operand.blockSize === 'number' && operand.blockSize !== 0) out.put(operand.blockSize);
  else throw refused;
  out.code(operand.kernel, BOOLEANS);
  out.number(operand.blocks);
  out.number(operand.elements);
  out.code(histogram.kind, SCALE_KINDS);
  out.number(histogram.minExp);
  out.number(histogram.nanBlocks);
  out.number(operand.saturatedFrac);
  out.number(operand.flushedFrac);
  out.nullable(operand.sqnrDb);
  out.counts(histogram.counts);
}

function writeWgradError(out: RowWriter, error: unknown): void {
  if (!isObject(error)) throw refused;
  noExtraKeys(error, WGRAD_NUMBERS.length + 2);
  for (const key of WGRAD_NUMBERS) {
    if (WGRAD_NULLABLE.has(key)) out.nullable(error[key]);
    else out.number(error[key]);
  }
  out.numbers(error.sketch);
  if (error.sketchPrev === null) out.put(-1);
  else out.numbers(error.sketchPrev);
}

const writer = new RowWriter();

/**
 * The row for `record` (a view of a shared buffer, valid until the next call), or undefined when the
 * row could not give it back exactly. Its type, runId, layer and gemm are the series' own and not stored.
 */
export function encodeLayerStats(record: LayerStatsRecord): Float64Array | undefined {
  const pair = GEMM_OPERANDS[record.gemm] as readonly string[] | undefined;
  const operands: unknown = record.operands;
  if (!pair || !Array.isArray(operands) || operands.length !== 2) return undefined;
  writer.reset();
  try {
    const { seq } = record as { seq?: unknown };
    noExtraKeys(record, 7 + +(record.wgradError !== undefined) + +(record.simulated !== undefined) + +(seq !== undefined));
    writer.put(0); // the length, filled in below
    if (seq === undefined) writer.put(NaN);
    else writer.nullable(seq);
    writer.number(record.step);
    if (record.precision === undefined) return undefined;
    writer.code(record.precision, PRECISIONS);
    writer.code(record.simulated, BOOLEANS);
    writer.put(record.wgradError === undefined ? 0 : 1);
    writeOperand(writer, operands[0], pair[0]!);
    writeOperand(writer, operands[1], pair[1]!);
    if (record.wgradError !== undefined) writeWgradError(writer, record.wgradError);
  } catch (error) {
    if (error === refused) return undefined;
    throw error;
  }
  writer.buffer[0] = writer.length;
  return writer.buffer.subarray(0, writer.length);
}

/** A row's first slots, as encodeLayerStats writes them; its operands follow. */
export const HEADER = { seq: 1, step: 2, precision: 3, simulated: 4, hasWgradError: 5, operands: 6 } as const;
/** An operand's slots before its counts, as writeOperand writes them. */
export const OPERAND = { format: 0, blockSize: 1, kernel: 2, blocks: 3, elements: 4, kind: 5, minExp: 6, nanBlocks: 7, saturatedFrac: 8, flushedFrac: 9, sqnrDb: 10, counts: 11 } as const;
/** The wgradError's number slots (WGRAD_NUMBERS order, then its sketches). */
export const WGRAD_SLOT = Object.fromEntries(WGRAD_NUMBERS.map((key, i) => [key, i])) as Record<(typeof WGRAD_NUMBERS)[number], number>;

/** Reads a row back; `identity` supplies what the row does not store. */
class RowReader {
  private at = 0;

  private readonly words: Uint32Array;

  constructor(private readonly row: Float64Array) {
    this.words = new Uint32Array(row.buffer, row.byteOffset, 2 * row.length);
  }

  private next(): number {
    return this.row[this.at++]!;
  }
  /** The slot `offset` after the reader's place, NaN read as null. */
  private nullableAt(offset: number): number | null {
    return nullable(this.row[this.at + offset]!);
  }
  private counts(): number[] {
    const length = this.next();
    const values = new Array<number>(length);
    const first = 2 * this.at;
    for (let i = 0; i < length; i++) values[i] = this.words[first + i]!;
    this.at += countSlots(length);
    return values;
  }
  private numbers(): number[] {
    const length = this.next();
    const values = new Array<number>(length);
    for (let i = 0; i < length; i++) values[i] = this.row[this.at++]!;
    return values;
  }
  private operand(name: string): OperandStats {
    const { row, at } = this;
    const format = row[at + OPERAND.format]!;
    const blockSize = row[at + OPERAND.blockSize]!;
    const kernel = row[at + OPERAND.kernel]!;
    const kind = row[at + OPERAND.kind]!;
    const histogram: ScaleHistogram = { minExp: row[at + OPERAND.minExp]!, counts: [], nanBlocks: row[at + OPERAND.nanBlocks]! };
    if (kind !== 0) histogram.kind = SCALE_KINDS[kind - 1];
    const stats: OperandStats = { operand: name as OperandStats['operand'], blocks: row[at + OPERAND.blocks]!, elements: row[at + OPERAND.elements]!, histogram, saturatedFrac: row[at + OPERAND.saturatedFrac]!, flushedFrac: row[at + OPERAND.flushedFrac]!, sqnrDb: this.nullableAt(OPERAND.sqnrDb) };
    this.at += OPERAND.counts;
    histogram.counts = this.counts();
    if (format !== 0) stats.format = STATS_FORMATS[format - 1];
    if (blockSize !== 0) stats.blockSize = blockSize;
    if (kernel !== 0) stats.kernel = BOOLEANS[kernel - 1];
    return stats;
  }
  private wgradError(): WgradError {
    const numbers = {} as Record<(typeof WGRAD_NUMBERS)[number], number | null>;
    for (const key of WGRAD_NUMBERS) numbers[key] = WGRAD_NULLABLE.has(key) ? this.nullableAt(WGRAD_SLOT[key]) : this.row[this.at + WGRAD_SLOT[key]]!;
    this.at += WGRAD_NUMBERS.length;
    const sketch = this.numbers();
    const sketchPrev = this.row[this.at] === -1 ? (this.at++, null) : this.numbers();
    return { ...(numbers as Omit<WgradError, 'sketch' | 'sketchPrev'>), sketch, sketchPrev };
  }

  record(identity: { runId: string; layer: string; gemm: GemmKind }): LayerStatsRecord {
    const { row } = this;
    const seq = row[HEADER.seq]!;
    this.at = HEADER.operands;
    const [first, second] = GEMM_OPERANDS[identity.gemm];
    const record: LayerStatsRecord = { ...(Number.isNaN(seq) ? {} : { seq }), type: 'layerStats', runId: identity.runId, step: row[HEADER.step]!, layer: identity.layer, gemm: identity.gemm, precision: precisionOf(row), operands: [this.operand(first), this.operand(second)] };
    if (row[HEADER.hasWgradError] === 1) record.wgradError = this.wgradError();
    const simulated = row[HEADER.simulated]!;
    if (simulated !== 0) record.simulated = BOOLEANS[simulated - 1];
    return record;
  }
}

/** Slots holding `length` counts, two to a slot. */
function countSlots(length: number): number {
  return Math.ceil(length / 2);
}

function precisionOf(row: Float64Array): Precision {
  return PRECISIONS[row[HEADER.precision]! - 1] as Precision;
}

/** The record a row holds. */
export function decodeLayerStats(row: Float64Array, identity: { runId: string; layer: string; gemm: GemmKind }): LayerStatsRecord {
  return new RowReader(row).record(identity);
}

/** Where the slots after the operand at `at` begin: its counts' length, then the counts. */
export function operandEnd(row: Float64Array, at: number): number {
  return at + OPERAND.counts + 1 + countSlots(row[at + OPERAND.counts]!);
}

/** A number slot read back: NaN is how a null is stored. */
export function nullable(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}

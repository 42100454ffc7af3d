// One (layer, GEMM)'s layerStats history with ThinningSeries' keep-every-2^k rule, held as rows of
// one Float64Array (layer-stats-row.ts) rather than as parsed records. A record is encoded as it
// arrives and no longer referenced: it dies young, where a record kept as an object (even just the
// newest of each series until the next stats step) outlived a scavenge and was copied into the old
// generation, ~1 KB per record at 20,000 records/s. The slab is reused for the whole run. Reading
// decodes, once until the next record arrives, or reads the rows in place (forEachKept, for views of
// every layer); the newest record's headline goes to the run's headline table (headline-table.ts).
import type { GemmKind } from '../protocol/config.js';
import type { LayerStatsRecord } from '../protocol/telemetry.js';
import { HeadlineTable, type LayerStatsHeadline } from './headline-table.js';
import { decodeLayerStats, encodeLayerStats } from './layer-stats-row.js';
import { RowFields } from './row-fields.js';
import type { GridFields } from '../protocol/layer-metrics.js';

/** Two views that take turns as a visit's record and the one before it (forEachKept). */
const VIEWS = [new RowFields(), new RowFields()] as const;

interface Identity {
  runId: string;
  layer: string;
  gemm: GemmKind;
}

/** A row's offset in the slab, or a record no row could hold, kept as it came. */
type Entry = number | LayerStatsRecord;

/**
 * The length of `record`'s row once the series' records carry sketchPrev: a run's first Wgrad stats
 * have none (there is no step before them; the trainer and the bridge send null) and the rest do,
 * so sizing the slab from that first, shorter row (64 slots short of 199 with the default sketch)
 * made every Wgrad series outgrow it and copy itself into one 1.5× larger: ~18 MB more fresh pages
 * in an 8B-sized run's first 65 stats steps.
 */
function rowLengthWithSketchPrev(row: Float64Array, record: LayerStatsRecord): number {
  const error = record.wgradError;
  return error && error.sketchPrev === null ? row.length + error.sketch.length : row.length;
}

export class LayerStatsSeries {
  private slab = new Float64Array(0);
  /** The slab as 32-bit words, made on a visit's first read of this slab (the counts are packed two to a slot). */
  private slabWords: Uint32Array | undefined;
  private used = 0;
  /** Kept entries, oldest first. */
  private entries: Entry[] = [];
  private stride = 1;
  private arrivals = 0;
  /**
   * The newest record: 'row' when its row is at newestAt in the slab (its kept entry's, or, when it
   * is not kept, the free space after the kept rows, which the next push writes over), else the record.
   */
  private newest: LayerStatsRecord | 'row' | undefined;
  private newestAt = 0;
  /** Whether the last entry is the newest record. */
  private newestKept = false;
  private decoded: readonly LayerStatsRecord[] | undefined;

  /** The newest record's headline goes to `headlines` at `place` (a table of its own by default). */
  constructor(
    readonly capacity: number,
    private readonly identity: Identity,
    private readonly headlines = new HeadlineTable(1),
    private readonly place = 0,
  ) {
    if (!Number.isInteger(capacity) || capacity < 2) throw new RangeError(`LayerStatsSeries capacity must be an integer ≥ 2, got ${capacity}`);
  }

  push(record: LayerStatsRecord): void {
    this.decoded = undefined;
    const row = encodeLayerStats(record);
    const kept = this.arrivals++ % this.stride === 0;
    if (row) {
      this.newest = 'row';
      this.newestAt = this.write(row, record);
      if (kept) this.used += row.length;
      this.headlines.setRow(this.place, row);
    } else {
      this.newest = record;
      this.headlines.setRecord(this.place, record);
    }
    this.newestKept = kept;
    if (!kept) return;
    this.entries.push(row ? this.newestAt : record);
    if (this.entries.length > this.capacity) this.thin();
  }

  /** The kept records, oldest first, always ending with the newest one pushed. */
  values(): readonly LayerStatsRecord[] {
    if (this.decoded) return this.decoded;
    const records: LayerStatsRecord[] = [];
    this.forEachEntry((entry) => records.push(typeof entry === 'number' ? this.decode(entry) : entry));
    return (this.decoded = records);
  }

  /**
   * Visits what values() gives, oldest first, as fields read in place from the rows, with the record
   * before each (undefined for the first): no record is decoded. A row's fields are a view that is
   * pointed at another row after `visit` returns, so read them during the call. Returns the count.
   */
  forEachKept(visit: (fields: GridFields, previous: GridFields | undefined) => void): number {
    let previous: GridFields | undefined;
    let turn = 0;
    return this.forEachEntry((entry) => {
      const fields = typeof entry === 'number' ? VIEWS[turn++ & 1]!.point(this.slab, (this.slabWords ??= new Uint32Array(this.slab.buffer)), entry) : entry;
      visit(fields, previous);
      previous = fields;
    });
  }

  /**
   * What values() gives, oldest first, as entries: the kept ones (but the newest, if kept) and then
   * the newest, as its row's offset (newestAt) or the record no row holds. Returns the count.
   */
  private forEachEntry(visit: (entry: Entry) => void): number {
    const kept = this.newestKept ? this.entries.length - 1 : this.entries.length;
    for (let i = 0; i < kept; i++) visit(this.entries[i]!);
    if (this.newest === 'row') visit(this.newestAt);
    else if (this.newest) visit(this.newest);
    return kept + (this.newest ? 1 : 0);
  }

  /**
   * The newest record's headline: the record itself if no row could hold it, else a view of the
   * headline table that follows the series (read it before the next push).
   */
  latestHeadline(): LayerStatsHeadline | undefined {
    return this.headlines.at(this.place);
  }

  private decode(at: number): LayerStatsRecord {
    return decodeLayerStats(this.slab.subarray(at, at + this.slab[at]!), this.identity);
  }

  /** Writes `row` after the kept rows (push keeps it there or not) and returns where. */
  private write(row: Float64Array, record: LayerStatsRecord): number {
    if (this.used + row.length > this.slab.length) {
      // Sized at first for the whole series (a series' rows are about the same length, and it
      // thins back to half once over capacity): every page of the slab is touched once, not again
      // on each copy into a larger one (first touches cost more than the copies here). Up to 128
      // rows at once; beyond that (a larger statsPerSeries) by half again.
      const first = Math.ceil(1.1 * rowLengthWithSketchPrev(row, record)) * Math.min(this.capacity + 1, 128);
      const grown = new Float64Array(Math.max(this.slab.length === 0 ? first : Math.ceil(1.5 * this.slab.length), this.used + row.length));
      grown.set(this.slab.subarray(0, this.used));
      this.slab = grown;
      this.slabWords = undefined;
    }
    this.slab.set(row, this.used);
    return this.used;
  }

  /** Keeps every other entry (the even ones) and packs their rows to the front of the slab. */
  private thin(): void {
    this.newestKept = (this.entries.length - 1) % 2 === 0;
    const kept: Entry[] = [];
    let used = 0;
    for (let i = 0; i < this.entries.length; i += 2) {
      const entry = this.entries[i]!;
      if (typeof entry !== 'number') {
        kept.push(entry);
        continue;
      }
      const length = this.slab[entry]!;
      this.slab.copyWithin(used, entry, entry + length);
      kept.push(used);
      used += length;
    }
    this.entries = kept;
    this.used = used;
    this.stride *= 2;
    // A kept newest row has moved with the others; one that was dropped stays where it was, past
    // `used`, until the next push writes over it.
    const last = kept.at(-1);
    if (this.newestKept && typeof last === 'number') this.newestAt = last;
  }
}

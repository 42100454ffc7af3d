// What the run-wide views (the layer overview, the GEMM notes, the Runs view) read off each
// (layer, GEMM)'s newest record, kept for a whole run in one table in the run's layer order. A stats
// step's overview reads every layer's headline: read through each series' own newest row, found by
// layer name, that was ~90,000 scattered lookups and row walks at 30,000 layers (~65 ms bundled);
// from one table they are a pass over consecutive slots.
import { PRECISIONS, type Precision } from '../protocol/config.js';
import { STATS_FORMATS, type LayerStatsRecord, type OperandStats, type WgradError } from '../protocol/telemetry.js';
import { BOOLEANS, HEADER, nullable, OPERAND, operandEnd, WGRAD_SLOT } from './layer-stats-row.js';

/**
 * The fields of a (layer, GEMM)'s newest record that views of every layer read: no histogram
 * counts or sketches. A record is one; the table gives one without decoding those.
 */
export interface LayerStatsHeadline extends Pick<LayerStatsRecord, 'step' | 'precision' | 'simulated'> {
  operands: readonly Pick<OperandStats, 'format' | 'saturatedFrac' | 'flushedFrac' | 'sqnrDb'>[];
  wgradError?: Pick<WgradError, 'relErr' | 'alignment' | 'lag1Cos'>;
}

/** A headline's slots: codes as the row holds them (0 absent, else 1 + index), null numbers NaN. */
const SLOT = { step: 0, precision: 1, simulated: 2, hasWgradError: 3, operands: 4, relErr: 12, alignment: 13, lag1Cos: 14 } as const;
/** An operand's slots from its start (the second operand's start OPERAND_WIDTH after the first's). */
const OPERAND_SLOT = { format: 0, saturatedFrac: 1, flushedFrac: 2, sqnrDb: 3 } as const;
const OPERAND_WIDTH = 4;
/** Slots per headline: 15 used, 16 so that a layer's three GEMMs take six whole cache lines. */
const WIDTH = 16;

const EMPTY = 0;
const FROM_ROW = 1;
/** A record no row could hold (layer-stats-row.ts): the table holds the record itself. */
const AS_RECORD = 2;

export class HeadlineTable {
  // Made at the first headline: a run's layer list may be long (up to 100,000 layers, 38 MB of
  // slots) and a run without stats, or a run log opened for its loss curve, never needs them.
  private slots = new Float64Array(0);
  private state = new Uint8Array(0);
  private readonly records = new Map<number, LayerStatsRecord>();
  /** Made on a place's first read and kept: it reads the place's slots, whatever record they hold now. */
  private views: (TableHeadline | undefined)[] = [];

  /** `places` headlines, numbered from 0 (the store numbers them layer index × 3 + GEMM index). */
  constructor(readonly places: number) {}

  private allocate(): void {
    if (this.state.length === this.places) return;
    this.slots = new Float64Array(this.places * WIDTH);
    this.state = new Uint8Array(this.places);
    this.views = new Array(this.places);
  }

  /** The headline of the record encoded as `row` (layer-stats-row.ts) becomes place's. */
  setRow(place: number, row: Float64Array): void {
    this.allocate();
    const slots = this.slots;
    const at = place * WIDTH;
    slots[at + SLOT.step] = row[HEADER.step]!;
    slots[at + SLOT.precision] = row[HEADER.precision]!;
    slots[at + SLOT.simulated] = row[HEADER.simulated]!;
    const hasWgradError = row[HEADER.hasWgradError]!;
    slots[at + SLOT.hasWgradError] = hasWgradError;
    let operand: number = HEADER.operands;
    for (let i = 0; i < 2; i++) {
      const to = at + SLOT.operands + i * OPERAND_WIDTH;
      slots[to + OPERAND_SLOT.format] = row[operand + OPERAND.format]!;
      slots[to + OPERAND_SLOT.saturatedFrac] = row[operand + OPERAND.saturatedFrac]!;
      slots[to + OPERAND_SLOT.flushedFrac] = row[operand + OPERAND.flushedFrac]!;
      slots[to + OPERAND_SLOT.sqnrDb] = row[operand + OPERAND.sqnrDb]!;
      operand = operandEnd(row, operand);
    }
    if (hasWgradError === 1) {
      slots[at + SLOT.relErr] = row[operand + WGRAD_SLOT.relErr]!;
      slots[at + SLOT.alignment] = row[operand + WGRAD_SLOT.alignment]!;
      slots[at + SLOT.lag1Cos] = row[operand + WGRAD_SLOT.lag1Cos]!;
    }
    if (this.state[place] === AS_RECORD) this.records.delete(place);
    this.state[place] = FROM_ROW;
  }

  /** `record`, which no row could hold, becomes place's headline as it is. */
  setRecord(place: number, record: LayerStatsRecord): void {
    this.allocate();
    this.records.set(place, record);
    this.state[place] = AS_RECORD;
  }

  /** Place's headline: a view of its slots, or the record no row could hold; undefined before any. */
  at(place: number): LayerStatsHeadline | undefined {
    switch (this.state[place]) {
      case FROM_ROW:
        return (this.views[place] ??= new TableHeadline(this.slots, place * WIDTH));
      case AS_RECORD:
        return this.records.get(place);
      case EMPTY:
      default:
        return undefined;
    }
  }
}

/** A headline read from the table at each access: it follows its place as newer records arrive. */
class TableHeadline implements LayerStatsHeadline {
  readonly operands: readonly [TableOperandHeadline, TableOperandHeadline];
  private readonly error: TableWgradHeadline;

  constructor(
    private readonly slots: Float64Array,
    private readonly at: number,
  ) {
    this.operands = [new TableOperandHeadline(slots, at + SLOT.operands), new TableOperandHeadline(slots, at + SLOT.operands + OPERAND_WIDTH)];
    this.error = new TableWgradHeadline(slots, at);
  }

  get step(): number {
    return this.slots[this.at + SLOT.step]!;
  }
  get precision(): Precision {
    return PRECISIONS[this.slots[this.at + SLOT.precision]! - 1] as Precision;
  }
  get simulated(): boolean | undefined {
    const code = this.slots[this.at + SLOT.simulated]!;
    return code === 0 ? undefined : BOOLEANS[code - 1];
  }
  get wgradError(): TableWgradHeadline | undefined {
    return this.slots[this.at + SLOT.hasWgradError] === 1 ? this.error : undefined;
  }
}

class TableOperandHeadline {
  constructor(
    private readonly slots: Float64Array,
    private readonly at: number,
  ) {}

  get format(): OperandStats['format'] {
    const code = this.slots[this.at + OPERAND_SLOT.format]!;
    return code === 0 ? undefined : STATS_FORMATS[code - 1];
  }
  get saturatedFrac(): number {
    return this.slots[this.at + OPERAND_SLOT.saturatedFrac]!;
  }
  get flushedFrac(): number {
    return this.slots[this.at + OPERAND_SLOT.flushedFrac]!;
  }
  get sqnrDb(): number | null {
    return nullable(this.slots[this.at + OPERAND_SLOT.sqnrDb]!);
  }
}

class TableWgradHeadline {
  constructor(
    private readonly slots: Float64Array,
    private readonly at: number,
  ) {}

  get relErr(): number | null {
    return nullable(this.slots[this.at + SLOT.relErr]!);
  }
  get alignment(): number | null {
    return nullable(this.slots[this.at + SLOT.alignment]!);
  }
  get lag1Cos(): number | null {
    return nullable(this.slots[this.at + SLOT.lag1Cos]!);
  }
}

// A stored row read in place as the heatmap's fields (GridFields), without decoding its record: a
// heatmap reads every kept record of one GEMM of every layer, and decoding them all after each stats
// step took 70-190 ms at 224 layers and ~0.5-2 s at 29,928 (docs/architecture.md). One view is
// pointed at row after row; its histogram counts are a view of the row's packed words.
import type { GridFields } from '../protocol/layer-metrics.js';
import { HEADER, nullable, OPERAND, operandEnd, WGRAD_SLOT } from './layer-stats-row.js';

export class RowFields implements GridFields {
  readonly operands: readonly [RowOperandFields, RowOperandFields];
  private readonly error = new RowWgradFields(this);
  rows: Float64Array = new Float64Array(0);
  /** The same memory as 32-bit words (the histogram counts are packed two to a slot). */
  words: Uint32Array = new Uint32Array(0);
  at = 0;
  /** Where the Wgrad error's slots begin: after the second operand's counts. */
  errorAt = 0;

  constructor() {
    this.operands = [new RowOperandFields(this), new RowOperandFields(this)];
  }

  /** Reads the row at `at` in `rows` from now on (`words`: the same buffer as 32-bit words). */
  point(rows: Float64Array, words: Uint32Array, at: number): this {
    this.rows = rows;
    this.words = words;
    this.at = at;
    const second = operandEnd(rows, at + HEADER.operands);
    this.operands[0].point(at + HEADER.operands);
    this.operands[1].point(second);
    this.errorAt = operandEnd(rows, second);
    return this;
  }

  get step(): number {
    return this.rows[this.at + HEADER.step]!;
  }
  get wgradError(): RowWgradFields | undefined {
    return this.rows[this.at + HEADER.hasWgradError] === 1 ? this.error : undefined;
  }
}

class RowOperandFields {
  at = 0;
  readonly histogram: { readonly minExp: number; readonly counts: Uint32Array };
  /** This row's counts, made at the first read: the scale shift reads each row twice (as a record and as the one before the next). */
  private counts: Uint32Array | undefined;

  constructor(private readonly row: RowFields) {
    const operand = this;
    this.histogram = {
      get minExp() {
        return row.rows[operand.at + OPERAND.minExp]!;
      },
      get counts() {
        return operand.countsView();
      },
    };
  }

  point(at: number): void {
    this.at = at;
    this.counts = undefined;
  }

  private countsView(): Uint32Array {
    if (this.counts) return this.counts;
    const first = this.at + OPERAND.counts + 1;
    return (this.counts = this.row.words.subarray(2 * first, 2 * first + this.row.rows[first - 1]!));
  }

  get saturatedFrac(): number {
    return this.row.rows[this.at + OPERAND.saturatedFrac]!;
  }
  get flushedFrac(): number {
    return this.row.rows[this.at + OPERAND.flushedFrac]!;
  }
  get sqnrDb(): number | null {
    return nullable(this.row.rows[this.at + OPERAND.sqnrDb]!);
  }
}

class RowWgradFields {
  constructor(private readonly row: RowFields) {}

  get relErr(): number | null {
    return nullable(this.row.rows[this.row.errorAt + WGRAD_SLOT.relErr]!);
  }
  get alignment(): number | null {
    return nullable(this.row.rows[this.row.errorAt + WGRAD_SLOT.alignment]!);
  }
  get lag1Cos(): number | null {
    return nullable(this.row.rows[this.row.errorAt + WGRAD_SLOT.lag1Cos]!);
  }
}

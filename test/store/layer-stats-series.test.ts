// The store keeps each (layer, GEMM) history as rows of numbers: what it gives back must be
// deep-equal to what it was given, field for field, and it must not hold on to the records.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { LayerStatsRecord, OperandStats } from '../../src/protocol/index.js';
import { HeadlineTable, type LayerStatsHeadline } from '../../src/store/headline-table.js';
import { decodeLayerStats, encodeLayerStats } from '../../src/store/layer-stats-row.js';
import { LayerStatsSeries } from '../../src/store/layer-stats-series.js';
import { ThinningSeries } from '../../src/store/thinning-series.js';

const IDENTITY = { runId: 'r', layer: 'blocks.0.q', gemm: 'wgrad' as const };

function operand(name: 'dy' | 'x', variant: number): OperandStats {
  const stats: OperandStats = {
    operand: name,
    blocks: 7 + variant,
    elements: 224,
    histogram: { minExp: -3 - variant, counts: [1, 0, 5 + variant, 1], nanBlocks: variant },
    saturatedFrac: variant === 1 ? -0 : 0.25,
    flushedFrac: 1 / 3,
    sqnrDb: variant === 2 ? null : 17.5 + variant,
  };
  if (variant === 1) Object.assign(stats, { format: 'nvfp4', blockSize: 16, kernel: false, histogram: { ...stats.histogram, kind: 'e4m3' } });
  if (variant === 2) Object.assign(stats, { format: 'mxfp8-e4m3', kernel: true, histogram: { ...stats.histogram, kind: 'e8m0' } });
  return stats;
}

/** Every optional field present and absent, nulls, -0 and a seq. */
function records(): LayerStatsRecord[] {
  const out: LayerStatsRecord[] = [];
  for (let variant = 0; variant < 3; variant++) {
    const record: LayerStatsRecord = { type: 'layerStats', runId: 'r', step: 10 * variant, layer: IDENTITY.layer, gemm: 'wgrad', precision: variant === 1 ? 'nvfp4' : 'mxfp4', operands: [operand('dy', variant), operand('x', 2 - variant)] };
    if (variant > 0) {
      record.wgradError = { gradNorm: 2, errNorm: 0.5, relErr: 0.25, cosErrGrad: variant === 2 ? null : -0.1, alignment: 1, gradToErr: 4, lag1Cos: null, sketch: [0.5, -0, 1e-30], sketchPrev: variant === 2 ? null : [1, 2, 3] };
    }
    if (variant === 2) record.simulated = true;
    if (variant === 1) record.simulated = false;
    out.push(variant === 0 ? ({ seq: 41, ...record } as LayerStatsRecord) : record);
  }
  return out;
}

/** Counts are packed two to a slot: an odd number of them, the largest packed, none. */
function countsRecords(): LayerStatsRecord[] {
  const [base] = records();
  return [[2 ** 30 - 1, 0, 3], [7], []].map((counts) => {
    const blocks = counts.reduce((sum, n) => sum + n, 0);
    return { ...base!, operands: [{ ...base!.operands[0]!, blocks, histogram: { minExp: -3, counts, nanBlocks: 0 } }, base!.operands[1]!] };
  });
}

test('a row gives back the record it was made from, optional fields, nulls, -0 and seq included', () => {
  for (const record of [...records(), ...countsRecords()]) {
    const row = encodeLayerStats(record);
    assert.ok(row, `step ${record.step} fits a row`);
    assert.deepStrictEqual(decodeLayerStats(Float64Array.from(row), IDENTITY), record);
  }
});

/** The fields of `record` a headline holds, picked by hand. */
function headlineOf(record: LayerStatsRecord): LayerStatsHeadline {
  const operands = record.operands.map(({ format, saturatedFrac, flushedFrac, sqnrDb }) => ({ saturatedFrac, flushedFrac, sqnrDb, ...(format === undefined ? {} : { format }) }));
  const headline: LayerStatsHeadline = { step: record.step, precision: record.precision, operands };
  if (record.wgradError) {
    const { relErr, alignment, lag1Cos } = record.wgradError;
    headline.wgradError = { relErr, alignment, lag1Cos };
  }
  if (record.simulated !== undefined) headline.simulated = record.simulated;
  return headline;
}

/** A headline's fields as a plain object (a table's are getters), optional ones only where defined. */
function plainHeadline(headline: LayerStatsHeadline | undefined): LayerStatsHeadline | undefined {
  if (!headline) return undefined;
  const defined = <T extends object>(fields: T) => Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as T;
  const { step, precision, simulated, wgradError } = headline;
  return defined({
    step,
    precision,
    simulated,
    operands: headline.operands.map(({ format, saturatedFrac, flushedFrac, sqnrDb }) => defined({ format, saturatedFrac, flushedFrac, sqnrDb })),
    wgradError: wgradError && { relErr: wgradError.relErr, alignment: wgradError.alignment, lag1Cos: wgradError.lag1Cos },
  });
}

test("the headline table reads each record's step, precision, simulated, operand figures and Wgrad error figures, and a place follows its newest record", () => {
  // Wgrad error figures apart from one another (relErr, alignment, lag1Cos and the fields beside them).
  const distinct = records().map((record, i) => (record.wgradError ? { ...record, wgradError: { ...record.wgradError, relErr: 0.125 + i, alignment: -0, lag1Cos: 0.5 + i } } : record));
  const all = [...records(), ...distinct, ...countsRecords()];
  // Places side by side, each written over: what one holds must not leak into its neighbours.
  const table = new HeadlineTable(3);
  assert.equal(table.at(1), undefined, 'no headline before a record');
  const view = (table.setRow(1, encodeLayerStats(all[0]!)!), table.at(1));
  all.forEach((record, i) => {
    table.setRow(0, encodeLayerStats(all[(i + 1) % all.length]!)!);
    table.setRow(1, encodeLayerStats(record)!);
    table.setRow(2, encodeLayerStats(all[(i + 2) % all.length]!)!);
    assert.deepStrictEqual(plainHeadline(table.at(1)), headlineOf(record), `record ${i}, step ${record.step}`);
    assert.deepStrictEqual(plainHeadline(view), headlineOf(record), 'the same headline over the next record');
    assert.deepStrictEqual(plainHeadline(table.at(0)), headlineOf(all[(i + 1) % all.length]!), 'the place before');
  });
  const odd = { ...all[1]!, note: 'no row holds it' } as LayerStatsRecord;
  table.setRecord(1, odd);
  assert.equal(table.at(1), odd, 'a record no row holds is its own headline');
  table.setRow(1, encodeLayerStats(all[2]!)!);
  assert.deepStrictEqual(plainHeadline(table.at(1)), headlineOf(all[2]!), 'and a row after it is read again');
});

test('records a row cannot give back exactly are refused: unknown fields at any level, NaN where null goes, operands out of order', () => {
  const [base] = records();
  const odd: [string, LayerStatsRecord][] = [
    ['extra record field', { ...base!, note: 'newer publisher' } as LayerStatsRecord],
    ['extra operand field', { ...base!, operands: [{ ...base!.operands[0]!, extra: 1 } as OperandStats, base!.operands[1]!] }],
    ['extra histogram field', { ...base!, operands: [{ ...base!.operands[0]!, histogram: { ...base!.operands[0]!.histogram, extra: 1 } as never }, base!.operands[1]!] }],
    ['NaN sqnrDb', { ...base!, operands: [{ ...base!.operands[0]!, sqnrDb: NaN }, base!.operands[1]!] }],
    ['operands swapped', { ...base!, operands: [base!.operands[1]!, base!.operands[0]!] }],
    ['a string count', { ...base!, operands: [{ ...base!.operands[0]!, histogram: { ...base!.operands[0]!.histogram, counts: ['1'] as never } }, base!.operands[1]!] }],
    // Counts a 32-bit word cannot give back, or whose word could make the slot a NaN.
    ...[2 ** 30, 2 ** 32, -0, 0.5, -1].map((count): [string, LayerStatsRecord] => [`count ${Object.is(count, -0) ? '-0' : count}`, { ...base!, operands: [{ ...base!.operands[0]!, histogram: { ...base!.operands[0]!.histogram, counts: [1, count] } }, base!.operands[1]!] }]),
  ];
  for (const [name, record] of odd) assert.equal(encodeLayerStats(record), undefined, name);
});

test('the series keeps the steps ThinningSeries keeps, returns refused records as they came, and ends with the newest', () => {
  const series = new LayerStatsSeries(4, IDENTITY);
  const reference = new ThinningSeries<LayerStatsRecord>(4);
  const [plain] = records();
  const pushed: LayerStatsRecord[] = [];
  for (let step = 0; step < 37; step++) {
    const record = step % 5 === 3 ? ({ ...plain!, step, note: 'kept as an object' } as LayerStatsRecord) : { ...plain!, step };
    pushed.push(record);
    series.push(record);
    reference.push(record);
    const values = series.values();
    assert.deepStrictEqual(values, reference.values(), `after step ${step}`);
    assert.deepStrictEqual(values.at(-1), record, 'the history ends with the newest');
    if (step % 5 === 3) assert.equal(series.latestHeadline(), record, 'a refused record is its own headline');
    else assert.deepStrictEqual(plainHeadline(series.latestHeadline()), headlineOf(record));
    for (const value of values) if ((value as { note?: string }).note) assert.equal(value, pushed[value.step], 'a refused record is the very object pushed');
  }
});

test('the series does not hold on to the records it was given', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const series = new LayerStatsSeries(64, IDENTITY);
  const steps = new ThinningSeries<number>(64);
  const refs: WeakRef<LayerStatsRecord>[] = [];
  // In a function of its own, so no frame of the test's keeps the last record.
  const fill = () => {
    for (let step = 0; step < 100; step++) {
      const record = { ...records()[1]!, step };
      refs.push(new WeakRef(record));
      series.push(record);
      steps.push(step);
    }
  };
  fill();
  await new Promise((resolve) => setImmediate(resolve)); // a WeakRef keeps its target alive until the job that made it ends
  gc();
  assert.equal(refs.filter((ref) => ref.deref() !== undefined).length, 0, 'every pushed record can be collected');
  assert.deepEqual(series.values().map((record) => record.step), steps.values(), 'and the history is still there');
});

test('a Wgrad series whose first record has no sketchPrev (a run\'s first stats) sizes its slab for the records after it, which do', () => {
  // Sized from the first, shorter row, every Wgrad series outgrew its slab and copied itself into
  // one 1.5× larger while a run filled: ~18 MB more fresh pages for an 8B-sized run.
  const [, base] = records();
  const sketch = Array.from({ length: 64 }, (_, i) => i / 64);
  const at = (step: number): LayerStatsRecord => ({ ...base!, step, wgradError: { ...base!.wgradError!, sketch, sketchPrev: step === 0 ? null : sketch.map((v) => -v) } });
  const slabs: number[] = [];
  const Native = globalThis.Float64Array;
  // Counts the store's Float64Arrays of more than a few rows (a slab; the newest row's copy is one row).
  globalThis.Float64Array = class extends Native {
    constructor(...args: unknown[]) {
      super(...(args as [number]));
      if (typeof args[0] === 'number' && args[0] > 2000) slabs.push(args[0]);
    }
  } as typeof Float64Array;
  const series = new LayerStatsSeries(64, IDENTITY);
  const reference = new ThinningSeries<LayerStatsRecord>(64);
  try {
    // 65 records fill the slab (the 65th thins the series).
    for (let step = 0; step < 65; step++) {
      series.push(at(step));
      reference.push(at(step));
    }
  } finally {
    globalThis.Float64Array = Native;
  }
  assert.equal(slabs.length, 1, `slabs allocated: ${slabs.join(', ')}`);
  assert.deepStrictEqual(series.values(), reference.values(), 'and the kept records come back');
});

// The overview rows and GEMM notes are computed from the store's headlines (views of each series'
// newest row), not from decoded records: on varied records they must be what decoded records give,
// value for value (-0 and all), as the code before the headlines computed them; and the page, which
// gets them as columns, holds what it held when they were sent as LayerRow objects in JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed } from '../../src/dashboard/feed.js';
import { runInfo } from '../../src/dashboard/views.js';
import { configRows } from '../../src/host/model/run-tree.js';
import { describeGemm, GEMM_KINDS, PRECISIONS, type GemmKind } from '../../src/protocol/config.js';
import { badness, LAYER_METRIC_SPECS } from '../../src/protocol/layer-metrics.js';
import { GEMM_OPERANDS, STATS_FORMATS, type LayerStatsRecord, type OperandStats, type TelemetryRecord } from '../../src/protocol/telemetry.js';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema, type DeltaMessage, type LayerOverview, type LayerRow, type SnapshotMessage } from '../../src/protocol/webview.js';
import { DashboardData } from '../../webview/dashboard/data.js';
import { delivered } from '../fixtures/webview-post.js';
import { RunStore, type RunView } from '../../src/store/run-store.js';
import { withGemmNotes } from '../../src/shared/gemm-notes.js';
import { Fuzzer } from '../fuzz/mutate.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';

const FRACTIONS = [0, -0, 0, 0.001, 0.25, 0.25, 1e-30, 0.5];
const SQNRS = [null, null, 12.5, 12.5, -0, 0, 30, -3];
const FIGURES = [null, 0, -0, 0.25, 0.25, 0.9, -1, 3];

function operand(fuzz: Fuzzer, name: OperandStats['operand']): OperandStats {
  const counts = Array.from({ length: fuzz.int(6) }, () => fuzz.int(100));
  const format = fuzz.pick([undefined, ...STATS_FORMATS]);
  // NVFP4 scales are E4M3 codes; the MX formats' E8M0 exponents, said or left unsaid.
  const kind = format === 'nvfp4' ? 'e4m3' : fuzz.pick([undefined, 'e8m0'] as const);
  const stats: OperandStats = {
    operand: name,
    blocks: counts.reduce((a, b) => a + b, 0),
    elements: 32 * counts.length,
    histogram: { minExp: fuzz.int(40) - 20, counts, nanBlocks: 0, ...(kind && { kind }) },
    saturatedFrac: fuzz.pick(FRACTIONS),
    flushedFrac: fuzz.pick(FRACTIONS),
    sqnrDb: fuzz.pick(SQNRS),
  };
  if (format) Object.assign(stats, { format, ...(format === 'nvfp4' && { blockSize: 16 }), ...(fuzz.chance(0.3) && { kernel: fuzz.chance(0.5) }) });
  return stats;
}

/** A record with or without each optional field, nulls, -0, ties; some a row cannot hold (kept as they came). */
function varied(fuzz: Fuzzer, runId: string, layer: string, gemm: GemmKind, step: number): LayerStatsRecord {
  const [first, second] = GEMM_OPERANDS[gemm];
  const record: LayerStatsRecord = { type: 'layerStats', runId, step, layer, gemm, precision: fuzz.pick(PRECISIONS), operands: [operand(fuzz, first), operand(fuzz, second)] };
  if (gemm === 'wgrad' && fuzz.chance(0.8)) {
    const sketch = [fuzz.int(9) - 4, 0.5];
    record.wgradError = { gradNorm: 1, errNorm: 0.2, relErr: fuzz.pick(FIGURES), cosErrGrad: fuzz.pick(FIGURES), alignment: fuzz.pick(FIGURES), gradToErr: fuzz.pick(FIGURES), lag1Cos: fuzz.pick(FIGURES), sketch, sketchPrev: fuzz.chance(0.5) ? null : sketch.map((v) => -v) };
  }
  if (fuzz.chance(0.5)) record.simulated = fuzz.chance(0.7);
  if (fuzz.chance(0.3)) return { seq: step * 100, ...record } as LayerStatsRecord;
  return fuzz.chance(0.1) ? ({ ...record, note: 'a newer publisher' } as LayerStatsRecord) : record;
}

/** The worst of the values, as the registry's worstOf did before: the first of equals, nulls skipped. */
function worstOf(values: readonly (number | null)[], worse: (typeof LAYER_METRIC_SPECS)[number]['worse']): number | null {
  return values.reduce<number | null>((worst, value) => (value !== null && (worst === null || badness(value, worse) > badness(worst, worse)) ? value : worst), null);
}

/** Every layer's overview row from fully decoded newest records (the code before the headlines). */
function decodedOverview(run: RunView): LayerOverview {
  let step = -1;
  const rows: LayerRow[] = run.layers.map(({ name }) => {
    const records = GEMM_KINDS.map((gemm) => run.layerStats(name, gemm).at(-1)).filter((record): record is LayerStatsRecord => record !== undefined);
    for (const record of records) step = Math.max(step, record.step);
    const wgrad = records.find((record) => record.gemm === 'wgrad');
    return { layer: name, values: LAYER_METRIC_SPECS.map((spec) => worstOf((spec.wgradOnly ? (wgrad ? [wgrad] : []) : records).map((record) => spec.ofRecord(record)), spec.worse)) };
  });
  return { runId: run.summary.runId, step, rows };
}

/** A GEMM's notes (after its label), from fully decoded newest records. */
function decodedGemmNotes(run: RunView, gemm: GemmKind): string {
  return withGemmNotes('', run.layers, gemm, run.layers.map(({ name }) => run.layerStats(name, gemm).at(-1)));
}

/** A run of 7 blocks whose layers get varied stats at steps 0, 10 and 20; some layers miss some GEMMs, some have none. */
function* variedRun(seed: number): Generator<TelemetryRecord> {
  const fuzz = new Fuzzer(seed);
  const started = syntheticRun({ runId: 'v', blocks: 7, steps: 30, statsEvery: 10, evalEvery: 0, sketchSize: 2, rotation: 'hadamard', seed }).next().value as TelemetryRecord & { type: 'runStarted' };
  yield started;
  for (const step of [0, 10, 20]) {
    yield { type: 'step', runId: 'v', step, tokens: step + 1, loss: 3, lr: 1e-3, gradNorm: 1, stepMs: 20 };
    for (const { name } of started.layers) for (const gemm of GEMM_KINDS) if (!name.endsWith('.k') && fuzz.chance(0.8)) yield varied(fuzz, 'v', name, gemm, step);
  }
}

function feedOf(records: Iterable<TelemetryRecord>): { store: RunStore; feed: DashboardFeed } {
  const store = new RunStore();
  for (const record of records) store.ingest(record);
  return { store, feed: new DashboardFeed(store, new AlertTracker()) };
}

/** What the page held when the rows were sent as LayerRow objects: JSON's copy (-0 a 0, a non-finite number null). */
function asJsonDelivered(overview: LayerOverview): LayerOverview {
  return JSON.parse(JSON.stringify(overview)) as LayerOverview;
}

/** The page's data after `messages`, each delivered as postMessage does and validated. */
function pageAfter(...messages: (SnapshotMessage | DeltaMessage)[]): DashboardData {
  const page = new DashboardData();
  for (const message of messages) {
    const received = check(hostToWebviewSchema, delivered(message));
    if (received.type === 'snapshot') page.applySnapshot(received);
    else if (received.type === 'delta') page.applyDelta(received);
  }
  return page;
}

test("the page's overview from headlines and columns is the overview from decoded records sent as rows, value for value: nulls, -0, ties, missing GEMMs and Wgrad errors, records kept as they came", () => {
  let negativeZeros = 0;
  for (const seed of [1, 2, 3, 4, 5]) {
    const records = [...variedRun(seed)];
    const cut = records.findIndex((record) => record.type === 'step' && record.step === 20);
    const { store, feed } = feedOf(records.slice(0, cut));
    const run = store.get('v')!;
    const { message, cursor } = feed.snapshot();
    const decoded = decodedOverview(run);
    negativeZeros += decoded.rows.filter((row) => row.values.some((value) => Object.is(value, -0))).length;
    assert.deepStrictEqual(pageAfter(message).overview.get('v'), asJsonDelivered(decoded), `seed ${seed}: snapshot`);
    assert.ok(decoded.rows.some((row) => row.values.every((value) => value === null)), 'a layer without stats has a row of nulls');
    for (const record of records.slice(cut)) store.ingest(record);
    const delta = feed.delta(cursor)!;
    const moved = new Set([...delta.overview[0]!.rows!].map((index) => run.layers[index]!.name));
    const expected = decodedOverview(run);
    assert.deepStrictEqual(pageAfter(message, delta).overview.get('v'), asJsonDelivered(expected), `seed ${seed}: snapshot and delta merged`);
    assert.deepStrictEqual(pageAfter(feed.snapshot().message).overview.get('v'), asJsonDelivered(expected), `seed ${seed}: a later snapshot`);
    const unmoved = expected.rows.filter((row) => !moved.has(row.layer));
    assert.deepStrictEqual(unmoved, decoded.rows.filter((row) => !moved.has(row.layer)), 'the rows the delta left out did not change');
    assert.ok(moved.size > 0 && moved.size < run.layers.length, 'the layers with new stats at step 20, not the others');
  }
  assert.ok(negativeZeros > 0, 'some rows hold -0');
});

test('the GEMM notes from headlines (dashboard run info, Runs view config) are those from decoded records', () => {
  let simulated = 0;
  for (const seed of [1, 2, 3, 4, 5]) {
    const { store } = feedOf(variedRun(seed));
    const run = store.get('v')!;
    const config = run.summary.config!;
    const info = runInfo(run, null);
    const rows = configRows(run.summary, run);
    for (const gemm of GEMM_KINDS) {
      const notes = decodedGemmNotes(run, gemm);
      assert.equal(info.gemms[gemm], [describeGemm(config.gemms[gemm]), notes].filter((part) => part !== '').join(' · '), `seed ${seed} ${gemm}`);
      const value = rows.find((row) => row.label === gemm)!.value;
      assert.ok(notes === '' ? !value.includes('simulated') : value.endsWith(` · ${notes}`), `seed ${seed} ${gemm}: Runs view "${value}", notes "${notes}"`);
      if (notes.includes('simulated')) simulated++;
    }
  }
  assert.ok(simulated > 0, 'some GEMMs have a simulated note');
});

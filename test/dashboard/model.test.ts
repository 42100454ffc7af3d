import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema, webviewToHostSchema, LAYER_METRICS, type OverviewUpdate, type SnapshotMessage } from '../../src/protocol/webview.js';
import { delivered } from '../fixtures/webview-post.js';
import { RunStore } from '../../src/store/run-store.js';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed } from '../../src/dashboard/feed.js';
import { syntheticRun, type SyntheticRunOptions } from '../fixtures/synthetic-run.js';
import { assignColorSlots, DEFAULT_UI_STATE, filterLayers, restoreUiState, worstFirst } from '../../webview/dashboard/model/ui-state.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { DashboardData } from '../../webview/dashboard/data.js';

const small: SyntheticRunOptions = { runId: 'a', blocks: 2, steps: 40, statsEvery: 10, evalEvery: 10, sketchSize: 16, rotation: 'hadamard', seed: 1 };

function feedWith(records: Iterable<TelemetryRecord>): { store: RunStore; alerts: AlertTracker; feed: DashboardFeed } {
  const store = new RunStore();
  const alerts = new AlertTracker();
  store.onDidChange((change) => change.record && alerts.ingest(change.record));
  for (const record of records) store.ingest(record);
  return { store, alerts, feed: new DashboardFeed(store, alerts) };
}

test('snapshot carries every run, its loss, validation and overview, and validates', () => {
  const { feed } = feedWith([...syntheticRun(small), ...syntheticRun({ ...small, runId: 'b', rotation: 'random-hadamard', seed: 2 })]);
  const { message } = feed.snapshot();
  check(hostToWebviewSchema, delivered(message));
  assert.deepEqual(message.runs.map((r) => r.runId), ['a', 'b']);
  assert.equal(message.runs[0]!.layers!.length, 14);
  assert.equal(message.runs[0]!.gemms.wgrad, 'mxfp4 · H16');
  assert.equal(message.loss[0]!.step.length, 40);
  assert.equal(message.validation[0]!.step.length, 4);
  assert.equal(message.overview[0]!.rows, undefined, 'every row, in run info order');
  assert.equal(message.overview[0]!.layers, 14);
  assert.equal(message.overview[0]!.step, 30);
  assert.equal(message.overview[0]!.values.length, 14 * LAYER_METRICS.length);
});

test('deltas send only what is new; a new run forces a snapshot', () => {
  const records = [...syntheticRun(small)];
  const cut = records.findIndex((r) => r.type === 'step' && r.step === 25);
  const { store, feed } = feedWith(records.slice(0, cut));
  const { message: snapshot, cursor } = feed.snapshot();
  assert.equal(feed.delta(cursor)!.loss.length, 0, 'nothing new, nothing sent');
  for (const record of records.slice(cut)) store.ingest(record);
  const delta = feed.delta(cursor)!;
  check(hostToWebviewSchema, delta);
  assert.deepEqual(delta.loss[0]!.step, Array.from({ length: 15 }, (_, i) => 25 + i));
  assert.equal(delta.runs[0]!.status, 'completed');
  assert.equal(delta.runs[0]!.layers, undefined, 'the run info again, without the layers the page has');
  assert.equal(delta.overview.length, 1);
  const page = new DashboardData();
  page.applySnapshot(snapshot);
  page.applyDelta(delta);
  assert.deepEqual(page.run('a'), { ...delta.runs[0]!, layers: snapshot.runs[0]!.layers }, 'the page keeps the layers with the new info');
  assert.throws(() => new DashboardData().applyDelta(delta), /run info of a without its layers, which the page does not have/);
  store.ingest({ ...records[0]!, runId: 'other' } as TelemetryRecord);
  assert.equal(feed.delta(cursor), null, 'a new run: resync');
  const again = feed.snapshot().cursor;
  store.ingest(records[0]!);
  assert.equal(feed.delta(again), null, 'the same runId started afresh: resync');
});

test("a delta's overview holds the rows of the layers with new stats; merged, the page's overview is the snapshot's", () => {
  const dense = 'blocks.1.mlp.up';
  const records = [...syntheticRun({ ...small, denseLayer: dense })];
  const cut = records.findIndex((r) => r.type === 'step' && r.step === 25);
  const { store, feed } = feedWith(records.slice(0, cut));
  const { message, cursor } = feed.snapshot();
  const page = new DashboardData();
  page.applySnapshot(message);
  for (const record of records.slice(cut, records.findIndex((r) => r.type === 'step' && r.step === 27))) store.ingest(record);
  const delta = feed.delta(cursor)!;
  check(hostToWebviewSchema, delivered(delta));
  assert.deepEqual(layersOf(delta.overview[0]!, message.runs[0]!.layers!), [dense], 'steps 25 and 26 gave stats to the dense layer alone');
  assert.equal(feed.delta(cursor)!.overview.length, 0, 'nothing new, no overview');
  for (const record of records.slice(records.findIndex((r) => r.type === 'step' && r.step === 27))) store.ingest(record);
  const withStatsStep = feed.delta(cursor)!;
  assert.equal(withStatsStep.overview[0]!.rows, undefined, 'stats step 30 moved every layer');
  page.applyDelta(delta);
  const dropped = page.overview.get('a')!.rows.filter((row) => row.layer !== dense);
  page.applyDelta(withStatsStep);
  const fresh = new DashboardData();
  fresh.applySnapshot(feed.snapshot().message);
  assert.deepEqual(page.overview.get('a'), fresh.overview.get('a'), 'the merged overview is a fresh snapshot\'s');
  assert.ok(dropped.every((row) => !page.overview.get('a')!.rows.includes(row)), 'the stats step replaced every row');
});

test('a delta after steps without stats reads no layer\'s stats (~150 ms a delta before, on a run of 30,000 layers)', () => {
  const records = [...syntheticRun(small)];
  const cut = records.findIndex((r) => r.type === 'step' && r.step === 31);
  const { store, alerts } = feedWith(records.slice(0, cut));
  let reads = 0;
  const counted = {
    list: () => store.list(),
    get: (runId: string) => {
      const run = store.get(runId);
      return run && new Proxy(run, {
        get(target, key) {
          if (key === 'latestHeadline' || key === 'layerStats') reads++;
          const value = Reflect.get(target, key, target) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
  };
  const feed = new DashboardFeed(counted, alerts);
  const { cursor } = feed.snapshot();
  const steps = records.slice(cut).filter((r) => r.type === 'step' && r.step < 39);
  for (const record of steps) store.ingest(record);
  reads = 0;
  const delta = feed.delta(cursor)!;
  assert.equal(delta.loss[0]!.step.length, steps.length);
  assert.equal(reads, 0, 'no layer has new stats: none is read');
  const stats = records.find((r) => r.type === 'layerStats' && r.step === 30 && r.layer === 'blocks.1.mlp.up' && r.gemm === 'wgrad')!;
  store.ingest({ ...stats, step: 38 } as TelemetryRecord);
  const withStats = feed.delta(cursor)!;
  assert.ok(reads > 0);
  assert.deepEqual(layersOf(withStats.overview[0]!, store.get('a')!.layers.map((layer) => layer.name)), ['blocks.1.mlp.up'], 'the layer with new stats');
});

test('a delta merged into the page replaces the rows of its layers, in place; NaN is null', () => {
  const page = new DashboardData();
  const info = feedWith(syntheticRun(small)).feed.snapshot().message.runs[0]!;
  const layers = ['x', 'y', 'z'];
  const values = (...rows: number[][]) => new Float64Array(rows.flatMap((row) => [...row, ...new Array(LAYER_METRICS.length - row.length).fill(NaN)]));
  const nulls = new Array(LAYER_METRICS.length - 1).fill(null);
  page.applySnapshot({ type: 'snapshot', runs: [{ ...info, layers }], loss: [], validation: [], alerts: [], overview: [{ runId: 'a', step: 10, layers: 3, values: values([1], [2], [NaN]) }] });
  page.applyDelta({ type: 'delta', runs: [], loss: [], validation: [], alerts: [], overview: [{ runId: 'a', step: 11, layers: 3, rows: new Uint32Array([1, 2]), values: values([3], [4]) }] });
  assert.deepStrictEqual(page.overview.get('a'), { runId: 'a', step: 11, rows: [{ layer: 'x', values: [1, ...nulls] }, { layer: 'y', values: [3, ...nulls] }, { layer: 'z', values: [4, ...nulls] }] });
  const update = (rows?: number[]) => ({ runId: 'a', step: 12, layers: 3, ...(rows && { rows: new Uint32Array(rows) }), values: values(...(rows ?? [0, 1, 2]).map(() => [5])) });
  assert.throws(() => page.applyDelta({ type: 'delta', runs: [], loss: [], validation: [], alerts: [], overview: [{ ...update(), layers: 4, values: values([1], [2], [3], [4]) }] }), /overview of run a: 4 layers, its run info 3/);
  assert.throws(() => new DashboardData().applySnapshot({ type: 'snapshot', runs: [{ ...info, layers }], loss: [], validation: [], alerts: [], overview: [update([1])] }), /overview of run a: 1 of its 3 rows before the page had any/);
});

test('the page refuses an overview update whose columns do not fit: values for another row count, rows out of range or out of order, plain arrays', () => {
  const delta = (overview: Record<string, unknown>) => ({ type: 'delta', runs: [], loss: [], validation: [], alerts: [], overview: [{ runId: 'a', step: 3, layers: 4, ...overview }] });
  const width = LAYER_METRICS.length;
  check(hostToWebviewSchema, delta({ values: new Float64Array(4 * width) }));
  check(hostToWebviewSchema, delta({ rows: new Uint32Array([0, 3]), values: new Float64Array(2 * width) }));
  assert.throws(() => check(hostToWebviewSchema, delta({ values: new Float64Array(3 * width) })), /overview\[0\]\.values: expected 24 values \(4 rows × 6 metrics\), got number 18/);
  assert.throws(() => check(hostToWebviewSchema, delta({ rows: new Uint32Array([0, 4]), values: new Float64Array(2 * width) })), /overview\[0\]\.rows\[1\]: expected an index below 4/);
  assert.throws(() => check(hostToWebviewSchema, delta({ rows: new Uint32Array([2, 2]), values: new Float64Array(2 * width) })), /rows\[1\]: expected an index below 4 \(the run's layer count\) above the one before/);
  assert.throws(() => check(hostToWebviewSchema, delta({ values: new Array(4 * width).fill(0) })), /overview\[0\]\.values: expected a Float64Array/);
  assert.throws(() => check(hostToWebviewSchema, delta({ rows: [0], values: new Float64Array(width) })), /overview\[0\]\.rows: expected a Uint32Array/);
});

/** The names of the layers an overview update carries rows of. */
function layersOf(update: OverviewUpdate, layers: readonly string[]): string[] {
  return update.rows ? [...update.rows].map((index) => layers[index]!) : [...layers];
}

test('layer detail: exact histograms per stats step and sketch correlation', () => {
  const { feed } = feedWith(syntheticRun(small));
  const detail = feed.layerDetail({ type: 'requestLayer', requestId: 7, runId: 'a', layer: 'blocks.1.mlp.up', gemm: 'wgrad', operand: 'x', lag: 2 })!;
  check(hostToWebviewSchema, detail);
  assert.deepEqual(detail.steps, [0, 10, 20, 30]);
  assert.equal(detail.counts.length, 4 * detail.exponents);
  const firstStep = detail.counts.slice(0, detail.exponents).reduce((a, b) => a + b, 0);
  assert.ok(firstStep > 1000);
  assert.deepEqual(detail.lagCos.slice(0, 2), [null, null]);
  assert.ok(detail.lagCos[3]! > 0.5, 'a deterministic rotation keeps the error correlated');
  assert.equal(detail.autocorr[0], 1);
  const random = feedWith(syntheticRun({ ...small, rotation: 'random-hadamard' })).feed.layerDetail({ type: 'requestLayer', requestId: 1, runId: 'a', layer: 'blocks.1.mlp.up', gemm: 'wgrad', operand: 'x', lag: 1 })!;
  assert.ok(Math.abs(random.autocorr[1]!) < 0.5, `random rotation decorrelates: ${random.autocorr[1]}`);
  const fprop = feed.layerDetail({ type: 'requestLayer', requestId: 2, runId: 'a', layer: 'blocks.1.mlp.up', gemm: 'fprop', operand: 'w', lag: 1 })!;
  assert.deepEqual(fprop.lagCos, []);
});

test('alerts: NaN scales once per episode naming the first layer, divergence, spike', () => {
  const { alerts } = feedWith(syntheticRun({ ...small, nanAt: { step: 20, layer: 'blocks.0.attn.k' } }));
  const nan = alerts.alerts.filter((a) => a.kind === 'nan-scales');
  assert.equal(nan.length, 1);
  assert.equal(nan[0]!.step, 20);
  assert.equal(nan[0]!.layer, 'blocks.0.attn.k');
  const tracker = new AlertTracker();
  for (let step = 0; step < 50; step++) tracker.ingest({ type: 'step', runId: 'r', step, tokens: step, loss: 3 + 0.01 * Math.sin(step), lr: 1, gradNorm: 1, stepMs: 1 });
  assert.equal(tracker.alerts.length, 0);
  tracker.ingest({ type: 'step', runId: 'r', step: 50, tokens: 50, loss: 6, lr: 1, gradNorm: 1, stepMs: 1 });
  tracker.ingest({ type: 'step', runId: 'r', step: 51, tokens: 51, loss: null, lr: 1, gradNorm: 1, stepMs: 1 });
  tracker.ingest({ type: 'step', runId: 'r', step: 52, tokens: 52, loss: null, lr: 1, gradNorm: 1, stepMs: 1 });
  assert.deepEqual(tracker.alerts.map((a) => [a.kind, a.step]), [['loss-spike', 50], ['divergence', 51]]);
  assert.equal(tracker.divergedAt('r'), 51);
});

test('grad-to-error alert fires below √3', () => {
  const records = [...syntheticRun(small)].map((r) =>
    r.type === 'layerStats' && r.wgradError && r.step === 30 && r.layer === 'blocks.1.attn.v' ? { ...r, wgradError: { ...r.wgradError, gradToErr: 1.5 } } : r,
  );
  const { alerts } = feedWith(records);
  assert.deepEqual(alerts.alerts.map((a) => [a.kind, a.step, a.layer]), [['grad-to-err', 30, 'blocks.1.attn.v']]);
  assert.equal(alerts.alerts[0]!.message, '‖∇W‖/‖E‖ = 1.50 < √3 at step 30, first in blocks.1.attn.v');
  const perRank = records.map((r) => (r.type === 'runStarted' ? { ...r, config: { ...r.config, wgradErrorScope: 'rank' as const } } : r));
  assert.equal(feedWith(perRank).alerts.alerts[0]!.message, "‖∇W‖/‖E‖ = 1.50 < √3 at step 30, first in blocks.1.attn.v (Wgrad error: each rank's own, mean over ranks)");
  const sampled = records.map((r) => (r.type === 'runStarted' ? { ...r, config: { ...r.config, wgradErrorRowStride: 4 } } : r));
  assert.equal(feedWith(sampled).alerts.alerts[0]!.message, '‖∇W‖/‖E‖ = 1.50 < √3 at step 30, first in blocks.1.attn.v (Wgrad error: estimated from 1 in 4 rows)');
});

test('webview → host messages are validated', () => {
  assert.deepEqual(check(webviewToHostSchema, { type: 'ready' }), { type: 'ready' });
  assert.throws(() => check(webviewToHostSchema, { type: 'requestLayer', requestId: 1, runId: 'a', layer: 'l', gemm: 'wgrad', operand: 'q', lag: 1 }), /operand/);
  assert.throws(() => check(webviewToHostSchema, { type: 'nope' }), /one of ready/);
});

test('UI state restores what fits and defaults the rest', () => {
  assert.deepEqual(restoreUiState(undefined), DEFAULT_UI_STATE);
  const restored = restoreUiState({ tab: 'scales', ema: 5, gemm: 'fprop', operand: 'dy', layer: 'x', lag: -1, runIds: ['a', 3] });
  assert.equal(restored.tab, 'scales');
  assert.equal(restored.ema, 0.99, 'clamped to the slider range');
  assert.equal(restored.operand, 'x', 'dy is not an fprop operand');
  assert.equal(restored.layer, 'x');
  assert.equal(restored.lag, DEFAULT_UI_STATE.lag);
  assert.deepEqual(restored.runIds, ['a']);
  assert.equal(restored.groupExperts, true, 'experts grouped unless the user cleared the box');
  assert.equal(restoreUiState({ groupExperts: false }).groupExperts, false);
  assert.equal(restoreUiState({ groupExperts: 'no' }).groupExperts, true, 'not a boolean: the default');
});

test('layer filter: regex or substring, bounded', () => {
  const names = Array.from({ length: 224 }, (_, i) => `blocks.${i >> 3}.l${i & 7}`);
  assert.equal(filterLayers(names, 'blocks\\.1\\.', 500).total, 8);
  assert.equal(filterLayers(names, '', 50).names.length, 50);
  assert.equal(filterLayers(names, '[', 500).total, 0, 'an invalid regex falls back to substring');
});

test('worst first: direction per metric, nulls last', () => {
  const rows = [
    { layer: 'a', values: [0.1, 0.9, 0, 0, 20, null] },
    { layer: 'b', values: [0.3, 0.8, 0, 0, 10, null] },
    { layer: 'c', values: [null, null, null, null, null, null] },
  ];
  assert.deepEqual(worstFirst(rows, 'wgradRelErr').map((r) => r.layer), ['b', 'a', 'c']);
  assert.deepEqual(worstFirst(rows, 'sqnrDb').map((r) => r.layer), ['b', 'a', 'c']);
  assert.deepEqual(worstFirst(rows, 'alignment').map((r) => r.layer), ['b', 'a', 'c']);
});

test('colour slots: kept while a run is held, freed when it goes, lowest free for newcomers', () => {
  const first = assignColorSlots({}, ['a', 'b', 'c']);
  assert.deepEqual(first, { a: 0, b: 1, c: 2 });
  const afterRemoval = assignColorSlots(first, ['b', 'c', 'd']);
  assert.deepEqual(afterRemoval, { b: 1, c: 2, d: 0 }, 'b and c keep their colours; d reuses a\'s');
  assert.deepEqual(restoreUiState({ colors: { x: 3, y: -1, z: 1.5 } }).colors, { x: 3 });
});

test('a value JSON could not carry reaches the page as it did when rows went as JSON: a non-finite metric null, -0 a 0', () => {
  const records = [...syntheticRun(small)];
  const { store, feed } = feedWith(records.filter((r) => r.type !== 'layerStats' || r.step < 30));
  const stats = records.find((r) => r.type === 'layerStats' && r.step === 30 && r.layer === 'blocks.1.mlp.up' && r.gemm === 'wgrad')!;
  if (stats.type !== 'layerStats' || !stats.wgradError) throw new Error('the synthetic run has no Wgrad error on blocks.1.mlp.up');
  // An in-process trainer hands the store objects, not JSON, which can hold an infinity.
  store.ingest({ ...stats, operands: stats.operands.map((operand) => ({ ...operand, saturatedFrac: Infinity })) as typeof stats.operands, wgradError: { ...stats.wgradError, relErr: -0 } });
  const page = new DashboardData();
  page.applySnapshot(check(hostToWebviewSchema, delivered(feed.snapshot().message)) as SnapshotMessage);
  const row = page.overview.get('a')!.rows.find((r) => r.layer === 'blocks.1.mlp.up')!;
  assert.equal(row.values[LAYER_METRICS.indexOf('saturatedPct')], null);
  assert.ok(Object.is(row.values[LAYER_METRICS.indexOf('wgradRelErr')], 0), 'the -0 Wgrad error as a 0');
});

test("a run whose steps came before its runStarted is a new run when it comes: a snapshot, which gives the page the layers the overview's rows index", () => {
  const records = [...syntheticRun(small)];
  const firstSteps = records.slice(1).filter((r) => r.type === 'step' && r.step < 3);
  const { store, feed } = feedWith(firstSteps);
  const { message, cursor } = feed.snapshot();
  assert.deepEqual(message.runs[0]!.layers, [], 'no runStarted yet: no layers');
  for (const record of [records[0]!, ...records.slice(1).filter((r) => r.type !== 'step' || r.step >= 3)]) store.ingest(record);
  assert.equal(feed.delta(cursor), null, 'resync: the run info of a delta would not carry the layers again');
  const page = new DashboardData();
  page.applySnapshot(check(hostToWebviewSchema, delivered(feed.snapshot().message)) as SnapshotMessage);
  assert.equal(page.run('a')!.layers.length, 14);
  assert.equal(page.overview.get('a')!.rows.length, 14);
});

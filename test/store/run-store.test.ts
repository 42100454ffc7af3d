import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LAYERS_AT_FULL_HISTORY, RunStore, statsPerSeriesOf } from '../../src/store/run-store.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { loadRunLog, runLogDirs } from '../../src/store/load-run-log.js';
import { RunLogWriter } from '../../src/runlog/index.js';
import { ThinningSeries } from '../../src/store/thinning-series.js';
import { readFrame } from '../../src/link/frames.js';
import { MAX_SERVER_FRAME_BYTES } from '../../src/link/trainer-client.js';
import { SERVER_MESSAGE_TYPES, serverMessageSchema, type RunStartedRecord } from '../../src/protocol/index.js';
import { forEachStatsRecord, syntheticLayers, syntheticLayerStats, syntheticRunStarted, syntheticStep } from '../fixtures/synthetic-llama8b.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** JS heap and ArrayBuffers (the store keeps layer-stats history in typed arrays) after a full GC. */
function heapAfterGc(): number {
  gc();
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

test('thinning series stays bounded, evenly spread, and ends with the newest', () => {
  const series = new ThinningSeries<number>(8);
  for (let i = 0; i < 1000; i++) series.push(i);
  const kept = series.values();
  assert.ok(kept.length <= 9, `kept ${kept.length}`);
  assert.equal(kept[0], 0);
  assert.equal(kept[kept.length - 1], 999);
  const gaps = new Set(kept.slice(0, -1).map((v, i) => kept[i + 1]! - v).slice(0, -1));
  assert.deepEqual([...gaps], [series.keepEvery], 'kept points are evenly spaced');
});

test('summary follows the run: name, config, last step/loss, final loss on end', () => {
  const store = new RunStore();
  const changes: string[] = [];
  store.onDidChange((change) => changes.push(change.record?.type ?? 'removed'));
  store.ingest(syntheticRunStarted('r1', 3, 1));
  for (let step = 0; step < 3; step++) store.ingest(syntheticStep('r1', step));
  let [summary] = store.list();
  assert.equal(summary!.status, 'running');
  assert.equal(summary!.lastStep, 2);
  assert.equal(summary!.finalLoss, undefined);
  store.ingest({ type: 'runEnded', runId: 'r1', step: 2, status: 'completed', reason: 'done', endedAt: 't' });
  [summary] = store.list();
  assert.equal(summary!.status, 'completed');
  assert.equal(summary!.finalLoss, syntheticStep('r1', 2).loss);
  assert.deepEqual(changes, ['runStarted', 'step', 'step', 'step', 'runEnded']);
});

test('records for a run never started make an unknown-status run; a new runStarted resets it', () => {
  const store = new RunStore();
  store.ingest(syntheticStep('late', 5));
  assert.equal(store.list()[0]!.status, 'unknown');
  store.ingest(syntheticRunStarted('late', 10, 1));
  assert.equal(store.get('late')!.steps().length, 0);
  assert.equal(store.list().length, 1);
});

test('run limit drops the oldest finished run, never a running one', () => {
  const store = new RunStore({ runs: 2 });
  store.ingest(syntheticRunStarted('running', 1, 1));
  store.ingest(syntheticRunStarted('done', 1, 1));
  store.ingest({ type: 'runEnded', runId: 'done', step: 0, status: 'completed', reason: '', endedAt: 't' });
  store.ingest(syntheticRunStarted('new', 1, 1));
  assert.deepEqual(store.list().map((r) => r.runId), ['running', 'new']);
});

test('layerStats naming a layer the run did not declare (or of a run never started) are refused and stored nowhere', () => {
  const store = new RunStore();
  const layers = syntheticLayers().slice(0, 2);
  const changes: string[] = [];
  store.onDidChange((change) => changes.push(change.record?.type ?? 'other'));
  assert.match(store.ingest(syntheticLayerStats('early', 0, layers[0]!.name, 'wgrad', 1))!, /runStarted \(which declares the layers\) was not received/);
  store.ingest({ ...syntheticRunStarted('r', 30, 10), layers });
  for (let i = 0; i < 1000; i++) {
    assert.match(store.ingest(syntheticLayerStats('r', 0, `invented.${i}`, 'fprop', i))!, /layer "invented\.\d+" refused: run r's runStarted did not declare it/);
  }
  assert.equal(store.ingest(syntheticLayerStats('r', 0, layers[1]!.name, 'fprop', 1)), undefined);
  assert.deepEqual(store.get('r')!.seriesKeys(), [`${layers[1]!.name}/fprop`]);
  assert.deepEqual(changes, ['runStarted', 'layerStats'], 'refused records are not announced');
});

test('the store never holds more runs than its limit, even when every run is live', () => {
  const store = new RunStore({ runs: 5 });
  for (let i = 0; i < 50; i++) store.ingest(syntheticRunStarted(`live-${i}`, 10, 1));
  assert.deepEqual(store.list().map((s) => s.runId), ['live-45', 'live-46', 'live-47', 'live-48', 'live-49']);
  assert.equal(new RunStore({ runs: 1_000_000, stepsPerRun: 1e9 }).limits.runs, 1000, 'settings cannot exceed what the webview accepts');
});

test("a run's stats steps and each (layer, GEMM)'s history come back in step order", () => {
  const store = new RunStore();
  const layers = syntheticLayers().slice(0, 2);
  store.ingest({ ...syntheticRunStarted('r', 30, 10), layers });
  for (const step of [0, 10, 20]) forEachStatsRecord('r', step, layers, (record) => store.ingest(record));
  assert.deepEqual(store.get('r')!.statsSteps(), [0, 10, 20]);
  assert.deepEqual(store.get('r')!.layerStats(layers[0]!.name, 'wgrad').map((r) => r.step), [0, 10, 20]);
});

test("each layer's headlines are found by its index in the run's layers: per GEMM, the newest record's, a layer named twice reading its first's", () => {
  const store = new RunStore();
  const [a, b, c] = syntheticLayers();
  // b is declared twice: its records are the first b's, and both rows show them.
  store.ingest({ ...syntheticRunStarted('r', 30, 10), layers: [a!, b!, c!, { ...b! }] });
  store.ingest({ ...syntheticRunStarted('other', 30, 10), layers: [c!] });
  const run = store.get('r')!;
  assert.equal(run.latestHeadline(1, 'wgrad'), undefined, 'none before its first record');
  store.ingest(syntheticLayerStats('r', 0, b!.name, 'wgrad', 1));
  store.ingest(syntheticLayerStats('r', 10, b!.name, 'wgrad', 2));
  store.ingest(syntheticLayerStats('r', 10, c!.name, 'fprop', 3));
  store.ingest(syntheticLayerStats('other', 20, c!.name, 'fprop', 4));
  const stepOf = (layer: number, gemm: 'fprop' | 'dgrad' | 'wgrad') => run.latestHeadline(layer, gemm)?.step;
  assert.deepEqual([0, 1, 2, 3].map((layer) => [stepOf(layer, 'fprop'), stepOf(layer, 'dgrad'), stepOf(layer, 'wgrad')]), [
    [undefined, undefined, undefined],
    [undefined, undefined, 10],
    [10, undefined, undefined],
    [undefined, undefined, 10],
  ]);
  assert.equal(run.latestHeadline(1, 'wgrad')!.wgradError!.relErr, 0.1);
  assert.deepEqual(run.latestHeadline(2, 'fprop')!.operands.map((operand) => operand.saturatedFrac), syntheticLayerStats('r', 10, c!.name, 'fprop', 3).operands.map((operand) => operand.saturatedFrac));
  assert.equal(store.get('other')!.latestHeadline(0, 'fprop')!.step, 20, "another run's table is its own");
  for (const outside of [-1, 4, 1.5, NaN]) assert.equal(run.latestHeadline(outside, 'wgrad'), undefined, `index ${outside}`);
  // The history by index too: both rows of b visit b's two records.
  const visited = (layer: number, gemm: 'fprop' | 'wgrad') => {
    const steps: number[] = [];
    const count = run.forEachLayerStat(layer, gemm, (fields) => steps.push(fields.step));
    return { count, steps };
  };
  assert.deepEqual([1, 3].map((layer) => visited(layer, 'wgrad')), [{ count: 2, steps: [0, 10] }, { count: 2, steps: [0, 10] }]);
  assert.deepEqual(visited(2, 'fprop'), { count: 1, steps: [10] });
  for (const outside of [-1, 4, 1.5, NaN]) assert.deepEqual(visited(outside, 'wgrad'), { count: 0, steps: [] }, `index ${outside}`);
});

test("a run's headline table is made at its first layer stats, not at a runStarted of many layers", () => {
  const store = new RunStore();
  const [layer] = syntheticLayers();
  const layers = Array.from({ length: 100_000 }, (_, i) => ({ ...layer!, name: `layers.${i}` }));
  const arrays = () => (gc(), process.memoryUsage().arrayBuffers);
  const before = arrays();
  store.ingest({ ...syntheticRunStarted('long', 30, 10), layers });
  const started = arrays() - before;
  assert.ok(started < 4 * 2 ** 20, `a runStarted of 100,000 layers took ${started} bytes of ArrayBuffers`);
  store.ingest(syntheticLayerStats('long', 0, 'layers.99999', 'wgrad', 1));
  assert.equal(store.get('long')!.latestHeadline(99_999, 'wgrad')!.step, 0, 'its last layer has its headline');
  assert.ok(arrays() - before >= 100_000 * 3 * 16 * 8, 'the table is there once stats came');
});

// Interpretation of "224 layers × 3 GEMMs × 10,000 steps": 10,000 training steps with stats every
// 10 steps = 1,000 stats steps × 672 layerStats records (672,000 records) plus 10,000 step records.
// With the default 64 kept stats steps per series (≈43,000 kept records, as float64 rows) it measures ≈55 MiB.
export const MEMORY_BUDGET_BYTES = 80 * 1024 * 1024;

test(`an 8B-sized run (672,000 layer-stats records) stays within ${MEMORY_BUDGET_BYTES / 2 ** 20} MiB`, () => {
  const store = new RunStore();
  const before = heapAfterGc();
  const started = syntheticRunStarted('llama8b', 10_000, 10);
  store.ingest(started);
  let records = 0;
  for (let step = 0; step < 10_000; step++) {
    store.ingest(syntheticStep('llama8b', step));
    if (step % 10 === 0) {
      forEachStatsRecord('llama8b', step, started.layers, (record) => {
        store.ingest(record);
        records++;
      });
    }
  }
  const retained = heapAfterGc() - before;
  assert.equal(records, 672_000);
  const run = store.get('llama8b')!;
  const history = run.layerStats('blocks.31.down', 'wgrad');
  assert.ok(history.length <= store.limits.statsPerSeries + 1);
  assert.equal(history[0]!.step, 0, 'history still covers the start of the run');
  assert.equal(history[history.length - 1]!.step, 9_990, 'and ends at the newest stats step');
  assert.ok(retained < MEMORY_BUDGET_BYTES, `retained ${(retained / 2 ** 20).toFixed(1)} MiB`);
  console.log(`# 8B-sized run retained ${(retained / 2 ** 20).toFixed(1)} MiB for ${records} layer-stats records (budget ${MEMORY_BUDGET_BYTES / 2 ** 20} MiB)`);
});

test('a run of many layers keeps fewer stats steps per layer, so its layer stats stay within the same rows', () => {
  assert.equal(statsPerSeriesOf(64, 224), 64, 'an 8B-sized model keeps the setting');
  assert.equal(statsPerSeriesOf(64, LAYERS_AT_FULL_HISTORY), 64);
  assert.equal(statsPerSeriesOf(64, 1_043), 20, 'four blocks of a 128-expert MoE');
  assert.equal(statsPerSeriesOf(64, 100_000), 2, 'at least the first and the newest');
  assert.equal(statsPerSeriesOf(1_000, 224), 1_000, 'a larger setting is kept where the layers fit');
  const kept = (blocks: number) => {
    const store = new RunStore();
    const layer = 'blocks.0.attn.q';
    for (const record of syntheticRun({ runId: 'r', blocks, steps: 200, statsEvery: 2, evalEvery: 1_000, sketchSize: 8, rotation: 'hadamard', seed: 1, statsLayers: (name) => name === layer })) store.ingest(record);
    const records = store.get('r')!.layerStats(layer, 'wgrad');
    assert.equal(records.at(-1)!.step, 198, 'the newest is kept');
    assert.equal(records[0]!.step, 0, 'the first is kept');
    return records.length;
  };
  assert.ok(kept(32) > 32, 'a 224-layer run keeps up to 64 of its 100 stats steps');
  assert.ok(kept(149) <= 21, 'a 1,043-layer run keeps up to 20 (+ the newest)');
});

test('loading a run log: records land as a loaded run; a log cut short ends up unknown; loading twice does not double it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mxscope-load-'));
  const started = syntheticRunStarted('cut', 100, 10);
  const writer = new RunLogWriter(join(dir, 'cut'), started);
  for (let step = 0; step < 25; step++) writer.append(syntheticStep('cut', step));
  writer.close();
  appendFileSync(join(dir, 'cut', 'telemetry.ndjson'), '{"type":"step","runId":"cut","ste');
  const store = new RunStore();
  const progress: number[] = [];
  const loaded = await loadRunLog(store, join(dir, 'cut'), (count) => progress.push(count), 10);
  assert.equal(loaded.records, 26);
  assert.deepEqual(progress, [10, 20]);
  assert.equal(loaded.warnings.length, 1);
  assert.match(loaded.warnings[0]!, /line 27/);
  await loadRunLog(store, join(dir, 'cut'));
  const [summary] = store.list();
  assert.equal(store.list().length, 1);
  assert.equal(summary!.source, 'loaded');
  assert.equal(summary!.status, 'interrupted', 'a log that stops without runEnded');
  assert.equal(summary!.dir, join(dir, 'cut'));
  assert.equal(store.get('cut')!.steps().length, 25);
  await assert.rejects(loadRunLog(store, join(dir, 'missing')), /ENOENT/);
  assert.deepEqual(runLogDirs(dir), [join(dir, 'cut')], 'a folder of run directories lists them');
  assert.deepEqual(runLogDirs(join(dir, 'cut')), [join(dir, 'cut')]);
  rmSync(dir, { recursive: true, force: true });
});

test('protocol 1.7: a run whose layers list no sketch positions is read and stored like any other', () => {
  const started = syntheticRunStarted('unlisted', 20, 10);
  const unlisted = { ...started, seq: 1, layers: started.layers.map(({ sketchIndices: _, ...layer }) => layer) };
  const frame = readFrame(Buffer.from(JSON.stringify(unlisted)), false, serverMessageSchema, SERVER_MESSAGE_TYPES, MAX_SERVER_FRAME_BYTES);
  if (frame.kind !== 'message') assert.fail(`refused: ${JSON.stringify(frame)}`);
  const store = new RunStore();
  store.ingest(frame.message as RunStartedRecord);
  const layer = started.layers[3]!.name;
  store.ingest(syntheticLayerStats('unlisted', 0, layer, 'wgrad', 1));
  const run = store.get('unlisted')!;
  assert.deepEqual(run.layers.map((l) => l.name), started.layers.map((l) => l.name));
  assert.ok(run.layers.every((l) => l.sketchIndices === undefined));
  assert.equal(run.layerStats(layer, 'wgrad').at(-1)?.wgradError?.sketch.length, syntheticLayerStats('unlisted', 0, layer, 'wgrad', 1).wgradError?.sketch.length);
});

// The layer × step grid leaves out layers with no record of the GEMM in the run (a LoRA model's
// frozen base layers have no Wgrad) and names them, so the rows that remain are the ones with data.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema } from '../../src/protocol/webview.js';
import { RunStore } from '../../src/store/run-store.js';
import { layerGrid } from '../../src/dashboard/layer-grid.js';
import { GRID_METRICS, layerMetric, type GridMetric } from '../../src/protocol/layer-metrics.js';
import { GEMM_KINDS, type GemmKind } from '../../src/protocol/config.js';
import type { LayerStatsRecord } from '../../src/protocol/telemetry.js';
import type { RunView } from '../../src/store/run-store.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';

const FROZEN = (name: string) => /\.(attn\.(q|v)|mlp\.down)$/.test(name);

function gridOf(gemm: 'fprop' | 'wgrad', frozen?: (name: string) => boolean) {
  const store = new RunStore();
  for (const record of syntheticRun({ runId: 'lora', blocks: 2, steps: 41, statsEvery: 20, evalEvery: 0, sketchSize: 8, rotation: 'hadamard', seed: 1, frozen })) store.ingest(record);
  const run = store.get('lora')!;
  const grid = layerGrid(run, { type: 'requestLayerGrid', requestId: 7, runId: 'lora', metric: 'sqnrDb', gemm });
  check(hostToWebviewSchema, grid, 'layerGrid');
  return { ...grid, run };
}

test('layers with no record of the GEMM are named apart, not empty rows', () => {
  const wgrad = gridOf('wgrad', FROZEN);
  assert.deepEqual(wgrad.withoutStats, ['blocks.0.attn.q', 'blocks.0.attn.v', 'blocks.0.mlp.down', 'blocks.1.attn.q', 'blocks.1.attn.v', 'blocks.1.mlp.down']);
  assert.deepEqual(wgrad.layers, ['blocks.0.attn.k', 'blocks.0.attn.o', 'blocks.0.mlp.gate', 'blocks.0.mlp.up', 'blocks.1.attn.k', 'blocks.1.attn.o', 'blocks.1.mlp.gate', 'blocks.1.mlp.up']);
  assert.deepEqual(wgrad.steps, [0, 20, 40]);
  assert.equal(wgrad.values.length, wgrad.layers.length * wgrad.steps.length);
  assert.ok(wgrad.values.every((value) => value !== null), 'every remaining row has a value at every stats step');
  const sqnr = layerMetric('sqnrDb');
  for (const [row, layer] of wgrad.layers.entries()) {
    const records = wgrad.run.layerStats(layer, 'wgrad');
    assert.deepEqual(wgrad.values.slice(row * 3, row * 3 + 3), records.map((record, i) => sqnr.ofRecord(record, records[i - 1])), `${layer}: its own values in its row`);
  }
  const fprop = gridOf('fprop', FROZEN);
  assert.deepEqual(fprop.withoutStats, []);
  assert.equal(fprop.layers.length, 14, 'frozen layers still ran their Fprop');
});

/** The grid as it was built before it read rows in place: every kept record decoded, each metric off it and the one before. */
function decodedGrid(run: RunView, metric: GridMetric, gemm: GemmKind) {
  const spec = layerMetric(metric);
  const all = run.layers.map(({ name }) => ({ name, history: run.layerStats(name, gemm) }));
  const rows = all.filter(({ history }) => history.length > 0);
  const steps = [...new Set(rows.flatMap(({ history }) => history.map((record) => record.step)))].sort((a, b) => a - b);
  const values: (number | null)[] = new Array(rows.length * steps.length).fill(null);
  rows.forEach(({ history }, row) => history.forEach((record, i) => (values[row * steps.length + steps.indexOf(record.step)] = spec.ofRecord(record, history[i - 1]))));
  return { layers: rows.map(({ name }) => name), withoutStats: all.filter(({ history }) => history.length === 0).map(({ name }) => name), steps, values };
}

/** Seeded edits that rows must give back as they came: nulls, -0, odd histograms, and records no row holds (kept as objects). */
function varied(record: LayerStatsRecord, random: () => number): LayerStatsRecord {
  const pick = <T>(...options: T[]) => options[Math.floor(random() * options.length)]!;
  const operands = record.operands.map((operand) => {
    const counts = pick(operand.histogram.counts, [], [3], operand.histogram.counts.slice(1), [0, 7, 1]);
    return { ...operand, saturatedFrac: pick(operand.saturatedFrac, -0, 0, 1), flushedFrac: pick(operand.flushedFrac, -0, 0.5), sqnrDb: pick(operand.sqnrDb, null, -0, -3.5), histogram: { ...operand.histogram, minExp: pick(operand.histogram.minExp, -127, 4), counts } };
  });
  const edited: LayerStatsRecord = { ...record, operands };
  if (record.wgradError) edited.wgradError = { ...record.wgradError, relErr: pick(record.wgradError.relErr, null, -0), lag1Cos: pick(record.wgradError.lag1Cos, null, -0, -1) };
  return random() < 0.1 ? ({ ...edited, note: 'from a newer publisher: no row holds it' } as LayerStatsRecord) : edited;
}

test('every metric of the grid read off the rows in place is what the decoded records give, thinned series, nulls, -0 and records kept as objects included', () => {
  let seed = 17;
  const random = () => ((seed = Math.imul(seed ^ (seed >>> 15), 2246822507) + 0x6d2b79f5) >>> 0) / 2 ** 32;
  const store = new RunStore({ statsPerSeries: 4 });
  const scaleShiftsAgree = (gemm: GemmKind) => {
    const { layers, withoutStats, steps, values } = layerGrid(store.get('v')!, { type: 'requestLayerGrid', requestId: 1, runId: 'v', metric: 'scaleShift', gemm });
    assert.deepStrictEqual({ layers, withoutStats, steps, values }, decodedGrid(store.get('v')!, 'scaleShift', gemm), `scale shifts of ${gemm}`);
  };
  for (const record of syntheticRun({ runId: 'v', blocks: 2, experts: 3, steps: 131, statsEvery: 10, evalEvery: 0, sketchSize: 8, rotation: 'hadamard', seed: 5, frozen: (name) => name.endsWith('.attn.v') })) {
    store.ingest(record.type === 'layerStats' ? varied(record, random) : record);
    // Read during the run too: a series' slab may grow (rows of more counts) after a grid has read it.
    if (record.type === 'step' && record.step % 20 === 1) GEMM_KINDS.forEach(scaleShiftsAgree);
  }
  const run = store.get('v')!;
  let cells = 0;
  for (const gemm of GEMM_KINDS) {
    for (const metric of GRID_METRICS) {
      const grid = layerGrid(run, { type: 'requestLayerGrid', requestId: 1, runId: 'v', metric, gemm });
      const { layers, withoutStats, steps, values } = grid;
      assert.deepStrictEqual({ layers, withoutStats, steps, values }, decodedGrid(run, metric, gemm), `${metric} of ${gemm}`);
      cells += values.filter((value) => value !== null).length;
    }
  }
  assert.ok(cells > 1000, `${cells} cells with a value`);
  assert.ok(run.layerStats(run.layers[0]!.name, 'fprop').length < 14, 'the series were thinned');
});

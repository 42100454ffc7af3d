// The layer × step grid leaves out layers with no record of the GEMM in the run (a LoRA model's
// frozen base layers have no Wgrad) and names them, so the rows that remain are the ones with data.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema } from '../../src/protocol/webview.js';
import { RunStore } from '../../src/store/run-store.js';
import { layerGrid } from '../../src/dashboard/layer-grid.js';
import { layerMetric } from '../../src/protocol/layer-metrics.js';
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

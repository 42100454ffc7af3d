import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expertCount, expertGroupOf, groupExperts } from '../../webview/dashboard/model/expert-groups.js';
import { layerMetric } from '../../src/protocol/layer-metrics.js';
import { LAYER_METRICS, type LayerRow } from '../../src/protocol/webview.js';

test('an expert layer is named by its group, the expert number a star; other layers have none', () => {
  assert.equal(expertGroupOf('model.layers.3.mlp.experts.gate_up_proj.17'), 'model.layers.3.mlp.experts.gate_up_proj.*', 'the bridge names 3-D experts so');
  assert.equal(expertGroupOf('model.layers.3.block_sparse_moe.experts.17.w1'), 'model.layers.3.block_sparse_moe.experts.*.w1', 'a module list of experts');
  assert.equal(expertGroupOf('model.layers.3.mlp.shared_experts.up_proj'), null, 'a shared expert is one layer');
  assert.equal(expertGroupOf('model.layers.3.mlp.down_proj'), null);
  assert.equal(expertGroupOf('model.layers.3.self_attn.q_proj'), null, 'the block number comes before any experts');
  assert.equal(expertGroupOf('Experts.2'), 'Experts.*');
});

const row = (layer: string, value: (m: number) => number | null): LayerRow => ({ layer, values: LAYER_METRICS.map((_, m) => value(m)) });

test("a group row holds, per metric, its worst expert's value; lone experts and dense layers stay rows", () => {
  const rows = [
    row('b.0.attn.q', () => 1),
    row('b.0.mlp.experts.up.0', (m) => (m === 0 ? 5 : null)),
    row('b.0.mlp.experts.up.1', (m) => (m === 0 ? 2 : 7)),
    row('b.0.mlp.experts.up.2', (m) => (m === 0 ? -9 : 3)),
    row('b.1.mlp.experts.down.0', () => 4), // the only expert of its group: a row of its own
  ];
  const entries = groupExperts(rows);
  assert.deepEqual(entries.map((entry) => ('layer' in entry ? entry.layer.layer : `group ${entry.group.row.layer}`)), ['b.0.attn.q', 'group b.0.mlp.experts.up.*', 'b.1.mlp.experts.down.0']);
  const group = (entries[1] as { group: { row: LayerRow; experts: LayerRow[] } }).group;
  assert.deepEqual(group.experts.map((r) => r.layer), ['b.0.mlp.experts.up.0', 'b.0.mlp.experts.up.1', 'b.0.mlp.experts.up.2'], 'in the order given');
  LAYER_METRICS.forEach((metric, m) => {
    const worse = layerMetric(metric).worse;
    const want = m === 0 ? (worse === 'higher' ? 5 : -9) : worse === 'lower' ? 3 : 7;
    assert.equal(group.row.values[m], want, `${metric} (worse: ${worse})`);
  });
  assert.deepEqual(expertCount(entries), { experts: 3, groups: 1 });
  assert.deepEqual(expertCount(groupExperts(rows.slice(0, 1))), { experts: 0, groups: 0 });
});

test('a group sits where its first expert sits, so a worst-first order leads with its worst expert', () => {
  const rows = [row('e.experts.a.1', () => 9), row('dense', () => 8), row('e.experts.a.0', () => 1)];
  assert.deepEqual(groupExperts(rows).map((entry) => ('layer' in entry ? entry.layer.layer : entry.group.row.layer)), ['e.experts.a.*', 'dense']);
});

test("a grid's group row holds at each step its worst expert's value and names that expert", async () => {
  const { groupGridRows } = await import('../../webview/dashboard/model/expert-groups.js');
  const layers = ['attn.q', 'moe.experts.up.0', 'moe.experts.up.1', 'moe.experts.down.0'];
  // Two steps per row; the group's worst moves from expert 0 to expert 1, and a step without stats stays empty.
  const values = [1, 2, 0.5, null, 0.2, 0.9, 3, 4];
  const rows = groupGridRows(layers, values, 2, 'higher');
  assert.deepEqual(rows.map((row) => row.name), ['attn.q', 'moe.experts.up.*', 'moe.experts.down.0']);
  assert.deepEqual(rows[1]!.values, [0.5, 0.9]);
  assert.deepEqual(rows[1]!.shownExpert, ['moe.experts.up.0', 'moe.experts.up.1']);
  assert.deepEqual(rows[1]!.experts, ['moe.experts.up.0', 'moe.experts.up.1']);
  assert.deepEqual(rows[0]!.values, [1, 2]);
  assert.deepEqual(rows[0]!.shownExpert, [null, null]);
  assert.deepEqual(groupGridRows(layers, values, 2, 'lower')[1]!.values, [0.2, 0.9], 'lower is worse (SQNR)');
  assert.deepEqual(groupGridRows(['e.experts.a.0', 'e.experts.a.1'], [null, null], 1, 'higher')[0]!.shownExpert, [null]);
});

test('the groups counted from the names alone are the groups the rows make', async () => {
  const { expertsIn } = await import('../../webview/dashboard/model/expert-groups.js');
  const names = ['b.0.attn.q', 'b.0.experts.up.0', 'b.0.experts.up.1', 'b.0.experts.up.2', 'b.1.experts.down.0', 'b.1.experts.gate.0', 'b.1.experts.gate.1'];
  assert.deepEqual(expertsIn(names), { experts: 5, groups: 2 });
  assert.deepEqual(expertsIn(names), expertCount(groupExperts(names.map((layer) => row(layer, () => 1)))));
  assert.deepEqual(expertsIn(['dense']), { experts: 0, groups: 0 });
});

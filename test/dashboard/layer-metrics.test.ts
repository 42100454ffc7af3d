// The metric registry: one object per metric, for the layer overview and the heatmap. Each getter is checked on records
// written by hand, and the overview the host sends carries exactly the registry's metrics in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { badness, formatNumber, GRID_METRICS, LAYER_METRIC_SPECS, LAYER_METRICS, layerMetric, meanExponent, METRIC_SPECS, type LatestLayerStats } from '../../src/protocol/layer-metrics.js';
import type { LayerStatsRecord, OperandStats } from '../../src/protocol/telemetry.js';
import { worstFirst } from '../../webview/dashboard/model/ui-state.js';
import { Fuzzer } from '../fuzz/mutate.js';

const operand = (saturatedFrac: number, flushedFrac: number, sqnrDb: number | null): OperandStats => ({
  operand: 'x', blocks: 1, elements: 32, histogram: { minExp: 0, counts: [1], nanBlocks: 0 } as OperandStats['histogram'], saturatedFrac, flushedFrac, sqnrDb,
});
const record = (gemm: LayerStatsRecord['gemm'], operands: OperandStats[], wgradError?: Partial<NonNullable<LayerStatsRecord['wgradError']>>): LayerStatsRecord =>
  ({ type: 'layerStats', runId: 'r', step: 10, layer: 'l', gemm, precision: 'mxfp4', operands, ...(wgradError ? { wgradError } : {}) }) as LayerStatsRecord;

const wgrad = record('wgrad', [operand(0.001, 0.02, 18), operand(0.004, 0.01, null)], { relErr: 0.25, alignment: 0.9, lag1Cos: 0.6 });
const fprop = record('fprop', [operand(0.003, 0.05, 12.5), operand(0, 0, 30)]);
const values = (latest: LatestLayerStats) => Object.fromEntries(LAYER_METRIC_SPECS.map((spec) => [spec.name, spec.of(latest)]));

test('each metric reads its figure: Wgrad error fields, worst operand over all GEMMs, lowest SQNR', () => {
  assert.deepEqual(values({ records: [fprop, wgrad], wgrad }), {
    wgradRelErr: 0.25, alignment: 0.9, saturatedPct: 0.4, flushedPct: 5, sqnrDb: 12.5, lag1Cos: 0.6,
  });
});

test('a layer without stats, or without a Wgrad record, has null where its stats do not say', () => {
  assert.deepEqual(Object.values(values({ records: [], wgrad: undefined })), [null, null, null, null, null, null]);
  const onlyFprop = values({ records: [record('fprop', [operand(0.5, 0, null)])], wgrad: undefined });
  assert.deepEqual(onlyFprop, { wgradRelErr: null, alignment: null, saturatedPct: 50, flushedPct: 0, sqnrDb: null, lag1Cos: null });
});

test('names are unique, every metric has a label, and the wire order is the registry order', () => {
  assert.equal(new Set(LAYER_METRICS).size, LAYER_METRIC_SPECS.length);
  assert.deepEqual(LAYER_METRICS, LAYER_METRIC_SPECS.map((spec) => spec.name));
  for (const spec of LAYER_METRIC_SPECS) assert.ok(spec.label.length > 0 && spec.label.length <= 20, spec.name);
  assert.equal(layerMetric('sqnrDb').unit, 'dB');
});

test('format and worse drive what the overview shows: SQNR ranks lowest first, errors highest first', () => {
  assert.equal(layerMetric('wgradRelErr').format(0.123456), '0.123');
  assert.equal(layerMetric('sqnrDb').format(null), '—');
  assert.equal(formatNumber(123456), '1.23e+5');
  const rows = [{ layer: 'a', values: [0.1, 0, 0, 0, 20, 0] }, { layer: 'b', values: [0.3, 0, 0, 0, 10, 0] }, { layer: 'c', values: [null, 0, 0, 0, null, 0] }];
  assert.deepEqual(worstFirst(rows, 'wgradRelErr').map((row) => row.layer), ['b', 'a', 'c']);
  assert.deepEqual(worstFirst(rows, 'sqnrDb').map((row) => row.layer), ['b', 'a', 'c']);
});

test('the heatmap reads the same objects per record: one GEMM at a time, scale shift against the stats step before', () => {
  const grid = (record: LayerStatsRecord, previous?: LayerStatsRecord) => Object.fromEntries(GRID_METRICS.map((name) => [name, layerMetric(name).ofRecord(record, previous)]));
  assert.deepEqual(grid(fprop), { wgradRelErr: null, saturatedPct: 0.3, flushedPct: 5, sqnrDb: 12.5, lag1Cos: null, scaleShift: null });
  const shifted = record('fprop', [{ ...operand(0, 0, 1), histogram: { minExp: -3, counts: [1, 0, 3], nanBlocks: 0 } as OperandStats['histogram'] }]);
  // fprop's mean exponent is 0 (one block at 0 per operand); `shifted` has (−3 + 3·−1) / 4 = −1.5.
  assert.equal(layerMetric('scaleShift').ofRecord(shifted, fprop), -1.5);
  assert.equal(layerMetric('scaleShift').ofRecord(shifted), null);
  assert.equal(meanExponent(record('fprop', [])), null);
});

test('flags place each metric: the overview has alignment but no scale shift, the heatmap the reverse, wgrad-only metrics say so', () => {
  assert.deepEqual(GRID_METRICS, ['wgradRelErr', 'saturatedPct', 'flushedPct', 'sqnrDb', 'lag1Cos', 'scaleShift']);
  assert.deepEqual(LAYER_METRICS, ['wgradRelErr', 'alignment', 'saturatedPct', 'flushedPct', 'sqnrDb', 'lag1Cos']);
  assert.deepEqual(METRIC_SPECS.filter((spec) => spec.wgradOnly).map((spec) => spec.name), ['wgradRelErr', 'alignment', 'lag1Cos']);
  for (const spec of METRIC_SPECS) assert.ok(spec.title.length >= spec.label.length, spec.name);
  assert.equal(layerMetric('scaleShift').title, 'Scale shift (Δ mean exponent)');
  assert.deepEqual([-2, 1, 0.5].map((v) => badness(v, 'larger-change')), [2, 1, 0.5]);
  assert.deepEqual([-2, 1].map((v) => badness(v, 'lower')), [2, -1]);
});

test('the SQNR metric is the worst (lowest) known SQNR of the operands, as worstOf picks it: 5,000 seeded records with nulls, ties, -0 and odd shapes', () => {
  // The metric reads the operands in a loop rather than mapping them to an array for worstOf (the
  // host's alerts read it off every layerStats record): it must pick what worstOf picked, the first
  // of equal values (0 before -0) and whatever an unvalidated record holds included.
  const worstOfLowest = (values: readonly unknown[]) => values.reduce<unknown>((worst, value) => (value !== null && (worst === null || badness(value as number, 'lower') > badness(worst as number, 'lower')) ? value : worst), null);
  const fuzz = new Fuzzer(61);
  const choices: unknown[] = [null, 0, -0, 12.5, 12.5, -3, 1e-300, Number.MAX_VALUE, -Infinity, NaN, undefined, '7'];
  for (let i = 0; i < 5000; i++) {
    const sqnrs = Array.from({ length: fuzz.int(4) }, () => (fuzz.chance(0.5) ? fuzz.pick(choices) : Math.round((fuzz.int(2000) - 1000) / 10)));
    const stats = record('fprop', sqnrs.map((sqnrDb) => operand(0, 0, sqnrDb as number | null)));
    const got = layerMetric('sqnrDb').ofRecord(stats);
    assert.ok(Object.is(got, worstOfLowest(sqnrs)), `${String(got)} for ${sqnrs.map(String).join(', ')}`);
  }
});

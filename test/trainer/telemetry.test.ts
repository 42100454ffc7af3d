// Telemetry of the emulation trainer: records validate, histograms add up, the Wgrad error sketch
// reproduces the trainer's exact lag-1 correlation, and a seed fixes the loss curve bit for bit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { telemetryRecordSchema, type LayerStatsRecord, type TelemetryRecord } from '../../src/protocol/telemetry.js';
import type { RunConfig } from '../../src/protocol/config.js';
import { cosine } from '../../src/trainer/stats.js';
import { Trainer } from '../../src/trainer/trainer.js';
import { microConfig } from './micro.js';

function train(config: RunConfig, steps: number): TelemetryRecord[] {
  const trainer = new Trainer(config, 'test-run');
  const records: TelemetryRecord[] = [];
  for (let i = 0; i < steps; i++) trainer.step((record) => records.push(record));
  return records;
}

const layerStats = (records: TelemetryRecord[]): LayerStatsRecord[] => records.filter((r): r is LayerStatsRecord => r.type === 'layerStats');

test('stats steps report every layer × GEMM × operand with exact histograms that add up to the blocks', () => {
  const config = microConfig({ fprop: { precision: 'fp8' }, dgrad: { precision: 'mxfp4', rotation: 'hadamard', hadamardBlock: 16 }, wgrad: { precision: 'mxfp4', rotation: 'random-hadamard', hadamardBlock: 32, rounding: 'stochastic', srPrescale: true } });
  const records = train(config, 3);
  for (const record of records) check(telemetryRecordSchema, record);
  const stats = layerStats(records);
  const trainer = new Trainer(config);
  assert.equal(stats.length, trainer.model.linears.length * 3 * 2, 'stats at steps 0 and 2, one per layer and GEMM');
  assert.deepEqual([...new Set(stats.map((s) => s.step))], [0, 2]);
  for (const record of stats) {
    assert.equal(record.precision, config.gemms[record.gemm].precision);
    assert.equal(record.wgradError !== undefined, record.gemm === 'wgrad');
    for (const operand of record.operands) {
      const { counts, nanBlocks } = operand.histogram;
      assert.equal(counts.reduce((a, b) => a + b, 0) + nanBlocks, operand.blocks, `${record.layer} ${record.gemm} ${operand.operand}`);
      assert.equal(operand.blocks * 32, operand.elements);
      assert.ok(counts.length === 0 || (counts[0]! > 0 && counts.at(-1)! > 0), 'histogram trimmed to the exponents that occurred');
      assert.ok(operand.sqnrDb !== null && operand.sqnrDb > 5 && operand.sqnrDb < 40, `MXFP4 SQNR ${operand.sqnrDb} dB is implausible`);
    }
  }
  assert.equal(records.filter((r) => r.type === 'step').length, 3);
  assert.deepEqual(records.filter((r) => r.type === 'validation').map((r) => r.step), [1], 'every evalEvery steps');
});

test('the Wgrad error sketch reproduces the exact lag-1 correlation', () => {
  const config = microConfig({ wgrad: { precision: 'mxfp4' } });
  config.sketchSize = 1024;
  const sizes = new Map(new Trainer(config).model.layerInfos().map((l) => [l.name, l.outFeatures * l.inFeatures]));
  const stats = layerStats(train(config, 5)).filter((s) => s.wgradError);
  const withLag = stats.filter((s) => s.step > 0);
  assert.ok(withLag.length > 0);
  for (const record of stats.filter((s) => s.step === 0)) assert.equal(record.wgradError!.lag1Cos, null, 'no previous step at step 0');
  for (const record of withLag) {
    const error = record.wgradError!;
    assert.ok(error.lag1Cos !== null && error.sketchPrev !== null, `${record.layer} step ${record.step} lacks its lag-1 pair`);
    const fromSketch = cosine(error.sketch, error.sketchPrev)!;
    // A sketch covering the whole layer must agree exactly; a sampled one within sampling error.
    const tolerance = sizes.get(record.layer) === error.sketch.length ? 1e-5 : 4 / Math.sqrt(error.sketch.length);
    assert.ok(Math.abs(fromSketch - error.lag1Cos!) <= tolerance, `${record.layer} step ${record.step}: sketch gives ${fromSketch}, exact ${error.lag1Cos}`);
  }
});

test('the Wgrad error is zero in fp32 and the alignment is one', () => {
  const [record] = layerStats(train(microConfig(), 1)).filter((s) => s.wgradError);
  const error = record!.wgradError!;
  assert.equal(error.errNorm, 0);
  assert.equal(error.alignment, 1);
  assert.equal(error.gradToErr, null);
  assert.ok(error.gradNorm > 0);
});

test('stochastic rounding with the 3/4 pre-scale keeps every gradient finite', () => {
  const config = microConfig({ dgrad: { precision: 'mxfp4', rounding: 'stochastic', srPrescale: true }, wgrad: { precision: 'mxfp4', rounding: 'stochastic', srPrescale: true } });
  for (const record of train(config, 4)) if (record.type === 'step') assert.ok(record.gradNorm !== null && record.loss !== null, `step ${record.step}: loss ${record.loss}, gradient norm ${record.gradNorm}`);
});

test('the same config and seed give the same loss curve bit for bit', () => {
  const config = microConfig({ fprop: { precision: 'mxfp4', rounding: 'stochastic' }, wgrad: { precision: 'mxfp4', rotation: 'random-hadamard', rounding: 'stochastic' } });
  const losses = (c: RunConfig) => train(c, 4).flatMap((r) => (r.type === 'step' ? [r.loss] : []));
  const first = losses(config);
  assert.deepEqual(losses(config), first);
  assert.notDeepEqual(losses({ ...config, seed: config.seed + 1 }), first, 'another seed should change the curve');
});

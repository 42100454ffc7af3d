// The production recipes in the emulation trainer: NVFP4 and MXFP8 GEMMs with stats in their own
// formats, MX scale rules, the fixed-sign Hadamard (same signs every step, unlike random-hadamard),
// and bad combinations refused when the run is configured.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { check } from '../../src/protocol/validate.js';
import { telemetryRecordSchema, type LayerStatsRecord, type TelemetryRecord } from '../../src/protocol/telemetry.js';
import type { RunConfig } from '../../src/protocol/config.js';
import { decodeFp8 } from '../../src/mx/index.js';
import { startRun } from '../../src/trainer/run.js';
import { Trainer, trainingGemmStep } from '../../src/trainer/trainer.js';
import { microConfig } from './micro.js';

function train(config: RunConfig, steps: number): TelemetryRecord[] {
  const trainer = new Trainer(config, 'recipes');
  const records: TelemetryRecord[] = [];
  for (let i = 0; i < steps; i++) trainer.step((record) => records.push(record));
  return records;
}
const layerStats = (records: TelemetryRecord[]) => records.filter((r): r is LayerStatsRecord => r.type === 'layerStats');
const losses = (records: TelemetryRecord[]) => records.flatMap((r) => (r.type === 'step' ? [r.loss] : []));

test('NVFP4 and MXFP8 GEMMs train and report stats in their own formats: E4M3 scale codes for NVFP4, E8M0 for MXFP8', () => {
  const config = microConfig({ fprop: { precision: 'nvfp4', nvfp4Weight2d: true }, dgrad: { precision: 'mxfp8', scaleRule: 'rceil' }, wgrad: { precision: 'nvfp4', rotation: 'fixed-sign-hadamard' } });
  const records = train(config, 3);
  for (const record of records) check(telemetryRecordSchema, record);
  assert.ok(losses(records).every((loss) => loss !== null && loss > 0 && loss < 10));
  const stats = layerStats(records);
  assert.ok(stats.length > 0);
  for (const record of stats) {
    for (const operand of record.operands) {
      const where = `${record.layer} ${record.gemm} ${operand.operand}`;
      const { counts, nanBlocks } = operand.histogram;
      assert.equal(counts.reduce((a, b) => a + b, 0) + nanBlocks, operand.blocks, where);
      if (record.gemm === 'dgrad') {
        assert.equal(operand.format, operand.operand === 'dy' ? 'mxfp8-e5m2' : 'mxfp8-e4m3', where);
        assert.equal(operand.histogram.kind, undefined, `${where}: E8M0 histograms keep the 1.0 shape`);
        assert.equal(operand.blocks * 32, operand.elements, where);
        assert.equal(operand.saturatedFrac, 0, `${where}: rceil never saturates`);
        assert.ok(operand.sqnrDb! > (operand.operand === 'dy' ? 20 : 28), `${where}: MXFP8 SQNR ${operand.sqnrDb}`);
      } else {
        assert.equal(operand.format, 'nvfp4', where);
        assert.equal(operand.histogram.kind, 'e4m3', where);
        const tiles = record.gemm === 'fprop' && operand.operand === 'w';
        assert.equal(operand.blockSize, tiles ? 256 : 16, where);
        assert.equal(operand.blocks * operand.blockSize!, operand.elements, where);
        // Block scales are amax/6 · S_enc with S_enc = 448·6/amax: the largest block sits at 448 (code 126).
        assert.equal(operand.histogram.minExp + counts.length - 1, 126, `${where}: top scale code`);
        assert.equal(decodeFp8(126, 'e4m3'), 448);
        assert.ok(operand.sqnrDb! > 8 && operand.sqnrDb! < 45, `${where}: NVFP4 SQNR ${operand.sqnrDb}`);
      }
    }
  }
});

test('fixed-sign Hadamard keeps one sign vector for the whole run (TransformerEngine H16 by default); random-hadamard draws new ones', () => {
  const fixed = trainingGemmStep(microConfig({ wgrad: { precision: 'mxfp4', rotation: 'fixed-sign-hadamard', hadamardBlock: 16 } }));
  const first = Array.from(fixed.rotations.wgrad.signs(32)!);
  assert.deepEqual(Array.from(fixed.rotations.wgrad.signs(32)!), first);
  assert.deepEqual(first.slice(0, 16), [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]);
  assert.deepEqual(Array.from(fixed.statsRotations.wgrad.signs(32)!), first, 'telemetry measures the same fixed rotation');
  const block32 = trainingGemmStep(microConfig({ wgrad: { precision: 'mxfp4', rotation: 'fixed-sign-hadamard', hadamardBlock: 32 } }));
  const drawn = Array.from(block32.rotations.wgrad.signs(32)!);
  assert.deepEqual(Array.from(block32.rotations.wgrad.signs(32)!), drawn, 'block 32: drawn from the seed once');
  const otherSeed = microConfig({ wgrad: { precision: 'mxfp4', rotation: 'fixed-sign-hadamard', hadamardBlock: 32 } });
  otherSeed.seed = 99;
  assert.notDeepEqual(Array.from(trainingGemmStep(otherSeed).rotations.wgrad.signs(32)!), drawn, 'another seed, other signs');
  const random = trainingGemmStep(microConfig({ wgrad: { precision: 'mxfp4', rotation: 'random-hadamard' } }));
  assert.notDeepEqual(Array.from(random.rotations.wgrad.signs(32)!), Array.from(random.rotations.wgrad.signs(32)!));

  // The three rotations give three different runs, each reproducible from its seed.
  const run = (rotation: 'hadamard' | 'fixed-sign-hadamard' | 'random-hadamard') => losses(train(microConfig({ fprop: { precision: 'mxfp4' }, dgrad: { precision: 'mxfp4' }, wgrad: { precision: 'mxfp4', rotation } }), 3));
  const curves = [run('hadamard'), run('fixed-sign-hadamard'), run('random-hadamard')];
  assert.deepEqual(run('fixed-sign-hadamard'), curves[1]);
  assert.equal(new Set(curves.map((c) => c.join())).size, 3);
});

test('scale rules change the MXFP4 histograms and saturation: rceil never saturates, floor does', () => {
  const saturation = (scaleRule: 'floor' | 'rceil' | 'even') => {
    const stats = layerStats(train(microConfig({ fprop: { precision: 'mxfp4', scaleRule }, dgrad: { precision: 'mxfp4', scaleRule }, wgrad: { precision: 'mxfp4', scaleRule } }), 1));
    return stats.flatMap((s) => s.operands.map((o) => o.saturatedFrac)).reduce((a, b) => a + b, 0);
  };
  assert.ok(saturation('floor') > 0, 'floor clamps some elements at ±6');
  assert.equal(saturation('rceil'), 0);
  assert.ok(saturation('even') < saturation('floor'), 'even rounds the amax up before picking the exponent');
});

test('a format/block/rotation combination that cannot work is refused when the run is configured; a misfit Hadamard block is padded', () => {
  // NVFP4 with H32 on a dimension of 48: 16 divides 48, and the rotation pads 48 to 64 (main's rule).
  const h32 = { precision: 'nvfp4', rotation: 'fixed-sign-hadamard', hadamardBlock: 32 } as const;
  const nvfp4H32 = microConfig({ fprop: h32, dgrad: h32, wgrad: h32 });
  nvfp4H32.model = { ...nvfp4H32.model, dim: 48, heads: 2 };
  const records = train(nvfp4H32, 1);
  for (const record of records) check(telemetryRecordSchema, record);
  const padded = layerStats(records).find((r) => r.gemm === 'fprop' && r.operands[1]!.elements % 48 !== 0);
  assert.ok(padded && padded.operands[1]!.format === 'nvfp4', 'some fprop reduces over 48 padded to 64');
  const mxfp8On48 = microConfig({ fprop: { precision: 'mxfp8' } });
  mxfp8On48.model = { ...mxfp8On48.model, dim: 48, heads: 2 };
  assert.throws(() => startRun({ config: mxfp8On48, outDir: tmpdir() }), /fprop: reduction dimension dim = 48 is not a multiple of the mxfp8 block 32; change the model shape or the precision/);
  assert.throws(() => startRun({ config: microConfig({ dgrad: { precision: 'nvfp4', scaleRule: 'even' } }), outDir: tmpdir() }), /dgrad: scale rule 'even' is for MX formats/);
  assert.throws(() => startRun({ config: microConfig({ wgrad: { precision: 'mxfp8', rounding: 'stochastic' } }), outDir: tmpdir() }), /wgrad: stochastic rounding is implemented for mxfp4 only/);
  assert.throws(() => startRun({ config: { ...microConfig({}), statsLayerGroups: 2 }, outDir: tmpdir() }), /statsLayerGroups: the embedded trainer reports every layer at every stats step \(layer groups are for the Python bridge on large models\); set statsLayerGroups to 1/);
  assert.throws(() => startRun({ config: { ...microConfig({}), wgradErrorRowStride: 4 }, outDir: tmpdir() }), /wgradErrorRowStride: the embedded trainer computes the Wgrad error on every row \(sampled rows are for the Python bridge on large models\); set wgradErrorRowStride to 1 or leave it out \(got 4\)/);
});

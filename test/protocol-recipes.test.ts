// Protocol 1.2: the production recipes in run configs (precisions, rotation, scale rule, NVFP4 tiles),
// their labels, the configuration-time refusal of combinations that cannot run, and layer stats
// that declare their block format, block size and scale-histogram kind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  check,
  describeGemm,
  gemmRecipeProblems,
  mergeRunConfig,
  nextRunConfigSchema,
  PROTOCOL_VERSION,
  rotationNote,
  runConfigSchema,
  telemetryRecordSchema,
  ValidationError,
  wgradErrorNote,
  type GemmConfig,
  type RunConfig,
} from '../src/protocol/index.js';

const gemm: GemmConfig = { precision: 'mxfp4', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false };
const config: RunConfig = {
  preset: 'tiny', seed: 1, steps: 100, tokensPerStep: 512, statsEvery: 10, sketchSize: 64, evalEvery: 50, data: 'brown',
  gemms: { fprop: { ...gemm }, dgrad: { ...gemm }, wgrad: { ...gemm } }, model: { dim: 64 }, optimizer: { lr: 1e-3 },
};

test('protocol 1.2: run configs carry the new precisions, rotation, scale rule and tiles; 1.0 configs stay valid', () => {
  assert.deepEqual(PROTOCOL_VERSION, { major: 1, minor: 8 });
  check(runConfigSchema, config);
  const recipes: RunConfig = { ...config, gemms: { fprop: { ...gemm, precision: 'nvfp4', nvfp4Weight2d: true }, dgrad: { ...gemm, precision: 'mxfp8', scaleRule: 'rceil' }, wgrad: { ...gemm, rotation: 'fixed-sign-hadamard', scaleRule: 'even' } } };
  check(runConfigSchema, recipes);
  assert.throws(() => check(runConfigSchema, { ...config, gemms: { ...config.gemms, wgrad: { ...gemm, scaleRule: 'ceil' } } }), (e: unknown) => e instanceof ValidationError && /\.gemms\.wgrad\.scaleRule: expected one of "floor", "rceil", "even"/.test(e.message));
  assert.throws(() => check(runConfigSchema, { ...config, gemms: { ...config.gemms, fprop: { ...gemm, nvfp4Weight2d: 'yes' } } }), /\.gemms\.fprop\.nvfp4Weight2d: expected a boolean/);
  const change = check(nextRunConfigSchema, { gemms: { wgrad: { scaleRule: 'rceil', rotation: 'fixed-sign-hadamard' } } });
  assert.deepEqual(mergeRunConfig(config, change).gemms.wgrad, { ...gemm, scaleRule: 'rceil', rotation: 'fixed-sign-hadamard' });
});

test('protocol 1.3: statsLayerGroups is optional, an integer from 1 to 1024', () => {
  check(runConfigSchema, { ...config, statsLayerGroups: 4 });
  check(runConfigSchema, { ...config, statsLayerGroups: 1024 });
  for (const bad of [0, 1025, 2.5, '4']) {
    assert.throws(() => check(runConfigSchema, { ...config, statsLayerGroups: bad }), /\.statsLayerGroups/, `statsLayerGroups ${JSON.stringify(bad)}`);
  }
});

test('protocol 1.4: wgradErrorScope is optional, batch or rank', () => {
  check(runConfigSchema, { ...config, wgradErrorScope: 'batch' });
  check(runConfigSchema, { ...config, wgradErrorScope: 'rank' });
  for (const bad of ['global', 'Rank', 1, null]) {
    assert.throws(() => check(runConfigSchema, { ...config, wgradErrorScope: bad }), /\.wgradErrorScope: expected one of "batch", "rank"/, `wgradErrorScope ${JSON.stringify(bad)}`);
  }
});

test('protocol 1.5: wgradErrorRowStride is optional, an integer from 1 to 1024', () => {
  for (const good of [1, 4, 1024]) assert.equal(check(runConfigSchema, { ...config, wgradErrorRowStride: good }).wgradErrorRowStride, good);
  for (const bad of [0, 1025, 2.5, '4']) {
    assert.throws(() => check(runConfigSchema, { ...config, wgradErrorRowStride: bad }), /\.wgradErrorRowStride: expected an integer in \[1, 1024\]/, `wgradErrorRowStride ${JSON.stringify(bad)}`);
  }
});

test('protocol 1.8: wgradErrorLag1 is optional, a boolean; false reads as no lag-1 wherever the Wgrad error notes show', () => {
  for (const good of [true, false]) assert.equal(check(runConfigSchema, { ...config, wgradErrorLag1: good }).wgradErrorLag1, good);
  for (const bad of ['false', 0, null]) {
    assert.throws(() => check(runConfigSchema, { ...config, wgradErrorLag1: bad }), /\.wgradErrorLag1: expected a boolean/, `wgradErrorLag1 ${JSON.stringify(bad)}`);
  }
  assert.equal(wgradErrorNote({ wgradErrorLag1: false }), 'Wgrad error: no lag-1 (opt-in)');
  assert.equal(wgradErrorNote({ wgradErrorLag1: true }), '', 'the default goes unsaid');
  assert.equal(wgradErrorNote({ wgradErrorScope: 'rank', wgradErrorRowStride: 4, wgradErrorLag1: false }), "Wgrad error: each rank's own, mean over ranks; estimated from 1 in 4 rows; no lag-1 (opt-in)");
});

test('protocol 1.6: a next-run change sets statsLayerGroups and wgradErrorRowStride; fields it does not name keep their value', () => {
  const change = check(nextRunConfigSchema, { statsEvery: 20, statsLayerGroups: 4, wgradErrorRowStride: 8 });
  const next = mergeRunConfig(config, change);
  assert.deepEqual([next.statsEvery, next.statsLayerGroups, next.wgradErrorRowStride], [20, 4, 8]);
  const unnamed = mergeRunConfig(next, { seed: 2 });
  assert.deepEqual([unnamed.statsLayerGroups, unnamed.wgradErrorRowStride], [4, 8], 'a change that does not name them keeps them');
  const back = mergeRunConfig(next, { statsLayerGroups: 1, wgradErrorRowStride: 1 });
  assert.deepEqual([back.statsLayerGroups, back.wgradErrorRowStride], [1, 1]);
  assert.equal(check(runConfigSchema, back), back);
  assert.ok(!('statsLayerGroups' in mergeRunConfig(config, { seed: 3 })), 'an absent opt-in stays absent');
  for (const field of ['statsLayerGroups', 'wgradErrorRowStride']) {
    for (const bad of [0, 1025, 2.5, '4', true]) {
      assert.throws(() => check(nextRunConfigSchema, { [field]: bad }), new RegExp(`\\.${field}: expected an integer in \\[1, 1024\\]`), `${field} ${JSON.stringify(bad)}`);
    }
  }
});

test('the Wgrad error note names each opt-in that changed what the figures describe, nothing by default', () => {
  assert.equal(wgradErrorNote({}), '');
  assert.equal(wgradErrorNote({ wgradErrorScope: 'batch', wgradErrorRowStride: 1 }), '', 'the defaults spelled out go unsaid too');
  assert.equal(wgradErrorNote({ wgradErrorScope: 'rank' }), "Wgrad error: each rank's own, mean over ranks");
  assert.equal(wgradErrorNote({ wgradErrorRowStride: 4 }), 'Wgrad error: estimated from 1 in 4 rows');
  assert.equal(wgradErrorNote({ wgradErrorScope: 'rank', wgradErrorRowStride: 4 }), "Wgrad error: each rank's own, mean over ranks; estimated from 1 in 4 rows");
});

test('labels name the format, the rotation (FSH = fixed-sign), a non-default scale rule and 2-D tiles', () => {
  assert.equal(describeGemm(gemm), 'mxfp4');
  assert.equal(describeGemm({ ...gemm, rotation: 'fixed-sign-hadamard' }), 'mxfp4 · FSH16');
  assert.equal(describeGemm({ ...gemm, rotation: 'random-hadamard', hadamardBlock: 32, rounding: 'stochastic', srPrescale: true }), 'mxfp4 · RHT32+SR¾');
  assert.equal(describeGemm({ ...gemm, scaleRule: 'rceil' }), 'mxfp4 · rceil');
  assert.equal(describeGemm({ ...gemm, scaleRule: 'floor' }), 'mxfp4');
  assert.equal(describeGemm({ ...gemm, precision: 'mxfp8', scaleRule: 'even', rotation: 'hadamard' }), 'mxfp8 · H16 · even');
  assert.equal(describeGemm({ ...gemm, precision: 'nvfp4', nvfp4Weight2d: true, rotation: 'fixed-sign-hadamard' }), 'nvfp4 · FSH16 · 2D');
  assert.equal(describeGemm({ ...gemm, precision: 'fp8', scaleRule: 'rceil' }), 'fp8');
  assert.equal(rotationNote('mxfp4 · FSH16'), 'fixed random signs, same rotation every step');
  assert.equal(rotationNote('nvfp4 · RHT16'), 'fresh random signs every step');
  assert.equal(rotationNote('mxfp4 · H32'), 'deterministic, no signs');
  assert.equal(rotationNote('fp8'), '');
});

test('combinations that cannot run are refused with what to change; a misfit Hadamard block is padded instead', () => {
  assert.deepEqual(gemmRecipeProblems('wgrad', { ...gemm, precision: 'nvfp4', rotation: 'hadamard', hadamardBlock: 32 }, { dim: 48 }), [], 'a misfit Hadamard block is padded (48 → 64), not refused');
  assert.deepEqual(gemmRecipeProblems('fprop', { ...gemm, precision: 'nvfp4' }, { dim: 48 }), [], 'NVFP4 needs multiples of 16 only');
  assert.deepEqual(gemmRecipeProblems('fprop', { ...gemm, precision: 'nvfp4' }, { dim: 40 }), ['fprop: reduction dimension dim = 40 is not a multiple of the nvfp4 block 16; change the model shape or the precision']);
  assert.match(gemmRecipeProblems('fprop', { ...gemm, precision: 'mxfp8' }, { dim: 48 }).join(), /dim = 48 is not a multiple of the mxfp8 block 32/);
  assert.match(gemmRecipeProblems('dgrad', { ...gemm, precision: 'nvfp4', scaleRule: 'rceil' }).join(), /scale rule 'rceil' is for MX formats .* set scaleRule to floor or precision to mxfp4\/mxfp8/);
  assert.match(gemmRecipeProblems('fprop', { ...gemm, nvfp4Weight2d: true }).join(), /nvfp4Weight2d needs precision nvfp4 \(it is mxfp4\)/);
  assert.match(gemmRecipeProblems('wgrad', { ...gemm, precision: 'mxfp8', rounding: 'stochastic' }).join(), /stochastic rounding is implemented for mxfp4 only/);
  assert.deepEqual(gemmRecipeProblems('wgrad', { ...gemm, rotation: 'fixed-sign-hadamard', scaleRule: 'even' }, { tokens: 512 }), []);
});

const histogram = { minExp: -3, counts: [1, 2], nanBlocks: 0 };
const operand = { operand: 'x', blocks: 3, elements: 96, histogram, saturatedFrac: 0, flushedFrac: 0, sqnrDb: 20 };
const layerStats = (operands: unknown[]) => ({ type: 'layerStats', runId: 'r', step: 0, layer: 'l', gemm: 'fprop', precision: 'nvfp4', operands });
const asW = (stats: object) => ({ ...stats, operand: 'w' });

test('layer stats declare their format, block size and histogram kind, and the three must agree', () => {
  check(telemetryRecordSchema, layerStats([operand, asW(operand)]));
  const nvfp4 = { ...operand, format: 'nvfp4', blockSize: 16, histogram: { kind: 'e4m3', minExp: 40, counts: [1, 2], nanBlocks: 0 } };
  check(telemetryRecordSchema, layerStats([nvfp4, { ...nvfp4, operand: 'w', blockSize: 256 }]));
  check(telemetryRecordSchema, layerStats([{ ...operand, format: 'mxfp8-e5m2', blockSize: 32 }, asW(operand)]));
  const cases: [unknown, RegExp][] = [
    [{ ...nvfp4, histogram: histogram }, /\.operands\[0\]\.histogram\.kind: expected 'e4m3' for format nvfp4, got "e8m0"/],
    [{ ...operand, format: 'mxfp8-e4m3', histogram: nvfp4.histogram }, /histogram\.kind: expected 'e8m0' for format mxfp8-e4m3/],
    [{ ...nvfp4, blockSize: 32 }, /\.blockSize: expected 16 or 256 for format nvfp4/],
    [{ ...operand, blockSize: 16 }, /\.blockSize: expected 32 for format mxfp4/],
    [{ ...operand, blockSize: 17 }, /\.blockSize: expected one of 16, 32, 256/],
    [{ ...operand, format: 'nvfp5' }, /\.format: expected one of "mxfp4", "nvfp4"/],
    [{ ...nvfp4, blocks: 1, histogram: { kind: 'e4m3', minExp: -1, counts: [1], nanBlocks: 0 } }, /\.histogram\.minExp: expected an e4m3 scale code in \[0, 126\]/],
    [{ ...nvfp4, blocks: 8, histogram: { kind: 'e4m3', minExp: 120, counts: [1, 1, 1, 1, 1, 1, 1, 1], nanBlocks: 0 } }, /\.histogram\.counts: expected at most 7 bins from minExp 120 \(e4m3 scale codes end at 126\)/],
    [{ ...operand, histogram: { minExp: 126, counts: [1, 1, 1], nanBlocks: 0 } }, /at most 2 bins from minExp 126 \(exponents end at 127\)/],
    [{ ...operand, histogram: { ...histogram, kind: 'e3m4' } }, /\.histogram\.kind: expected one of "e8m0", "e4m3"/],
  ];
  for (const [bad, message] of cases) {
    assert.throws(() => check(telemetryRecordSchema, layerStats([bad, asW(operand)])), (e: unknown) => e instanceof ValidationError && message.test(e.message), message.source);
  }
});

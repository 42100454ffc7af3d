// The emulated run's config has one path: the settings → emulationConfig. The trainer child's flags
// rebuild exactly that config, the change sent to a reused trainer brings it to the settings, and
// next-run changes (a preset switch too) apply to it in the child.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCliArgs } from '../../src/cli/train-args.js';
import { mergeRunConfig } from '../../src/protocol/index.js';
import { applyEmulationChange, emulationConfig, emulationServeArgs, emulationSettingsChange, type EmulationSettings } from '../../src/trainer/emulation-config.js';
import { presetConfig, PRESET_NAMES } from '../../src/trainer/index.js';
import { checkEmbeddedOptIns } from '../../src/trainer/stats-opt-ins.js';

const choices: EmulationSettings[] = PRESET_NAMES.flatMap((preset) => [1, 10, 37].map((statsEvery) => ({ preset, statsEvery })));

test('an emulated run starts from its preset with every GEMM in MXFP4 and the chosen stats interval', () => {
  const config = emulationConfig({ preset: 'small', statsEvery: 5 });
  assert.deepEqual(config.model, presetConfig('small').model);
  assert.equal(config.statsEvery, 5);
  for (const gemm of Object.values(config.gemms)) assert.deepEqual(gemm, { ...presetConfig('small').gemms.fprop, precision: 'mxfp4' });
});

test('the trainer child started with emulationServeArgs has emulationConfig as its base, for every preset and interval', () => {
  for (const settings of choices) {
    const command = parseCliArgs(['--serve', '--port', '0', ...emulationServeArgs(settings)]);
    assert.equal(command.kind, 'serve');
    assert.deepEqual(command.kind === 'serve' ? command.config : undefined, emulationConfig(settings), JSON.stringify(settings));
  }
});

test('a reused trainer is brought to the settings it was not started with', () => {
  const started = emulationConfig({ preset: 'tiny', statsEvery: 10 });
  const now = { preset: 'tiny', statsEvery: 3 } as const;
  assert.deepEqual(mergeRunConfig(started, emulationSettingsChange(now)), emulationConfig(now));
});

test("switching preset brings that preset's model and keeps the chosen GEMM settings and seed", () => {
  const tiny = presetConfig('tiny');
  const chosen = applyEmulationChange(tiny, { gemms: { wgrad: { precision: 'mxfp4', rotation: 'hadamard' } }, seed: 9 });
  const small = applyEmulationChange(chosen, { preset: 'small' });
  assert.deepEqual(small.model, presetConfig('small').model);
  assert.equal(small.tokensPerStep, presetConfig('small').tokensPerStep);
  assert.equal(small.gemms.wgrad.rotation, 'hadamard');
  assert.equal(small.seed, 9);
});

test('an unknown preset is refused by name', () => {
  assert.throws(() => applyEmulationChange(presetConfig('tiny'), { preset: 'huge' }), /unknown preset "huge": this trainer has tiny, small/);
});

test('the stats opt-ins of protocol 1.6 are refused when a next-run change asks for them, naming the Python bridge; 1 is the default and taken', () => {
  const tiny = presetConfig('tiny');
  assert.throws(() => applyEmulationChange(tiny, { statsLayerGroups: 4 }), /statsLayerGroups: the embedded trainer reports every layer at every stats step \(layer groups are for the Python bridge on large models\); set statsLayerGroups to 1 or leave it out \(got 4\)/);
  assert.throws(() => applyEmulationChange(tiny, { statsEvery: 20, wgradErrorRowStride: 8 }), /wgradErrorRowStride: .*sampled rows are for the Python bridge.*\(got 8\)/);
  assert.throws(() => applyEmulationChange(tiny, { wgradErrorLag1: false }), /wgradErrorLag1: the embedded trainer always measures lag-1 .*\(got false\)/);
  assert.throws(() => checkEmbeddedOptIns({ wgradErrorLag1: false }), /wgradErrorLag1: the embedded trainer always measures lag-1 .*\(got false\)/);
  checkEmbeddedOptIns({ wgradErrorLag1: true });
  const exact = applyEmulationChange(tiny, { statsEvery: 20, statsLayerGroups: 1, wgradErrorRowStride: 1 });
  assert.equal(exact.statsEvery, 20);
  assert.equal(exact.statsLayerGroups, 1);
  assert.equal(exact.wgradErrorRowStride, 1);
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEmulationChange } from '../../src/cli/serve.js';
import { presetConfig } from '../../src/trainer/index.js';

test('switching preset brings that preset\'s model and keeps the chosen GEMM settings and seed', () => {
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

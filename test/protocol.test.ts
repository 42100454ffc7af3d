import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../src/mx/rng.js';
import { check, float32Digits, mergeRunConfig, nextRunConfigSchema, telemetryRecordSchema, tryCheck, ValidationError, type RunConfig } from '../src/protocol/index.js';

const gemm = { precision: 'mxfp4', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false } as const;
const config: RunConfig = {
  preset: 'tiny', seed: 1, steps: 100, tokensPerStep: 512, statsEvery: 10, sketchSize: 64, evalEvery: 50, data: 'brown',
  gemms: { fprop: { ...gemm }, dgrad: { ...gemm }, wgrad: { ...gemm } }, model: { dim: 64 }, optimizer: { lr: 1e-3 },
};

test('a valid step record passes and keeps unknown extra fields', () => {
  const record = { type: 'step', runId: 'r', step: 3, tokens: 1536, loss: 4.2, lr: 1e-3, gradNorm: null, stepMs: 12, extra: 1 };
  assert.deepEqual(check(telemetryRecordSchema, record), record);
});

test('errors name the path that was wrong', () => {
  const result = tryCheck(telemetryRecordSchema, { type: 'runStarted', runId: 'r', name: 'n', startedAt: '2026-01-01T00:00:00Z', trainer: { name: 'x', version: '1' }, config: { ...config, gemms: { ...config.gemms, wgrad: { ...gemm, precision: 'fp2' } } }, layers: [] });
  assert.equal(result.ok, false);
  assert.ok(!result.ok && result.error.message.startsWith('.config.gemms.wgrad.precision: expected one of'), !result.ok ? result.error.message : '');
});

test('unknown record type is rejected with the known list', () => {
  assert.throws(() => check(telemetryRecordSchema, { type: 'nope' }), (e: unknown) => e instanceof ValidationError && /one of runStarted, step/.test(e.message));
});

test('NaN cannot sneak in as a number', () => {
  assert.throws(() => check(telemetryRecordSchema, { type: 'validation', runId: 'r', step: 1, tokens: 1, loss: Number.NaN }), ValidationError);
});

test('next-run config: unknown fields are named, merge keeps the rest', () => {
  assert.throws(() => check(nextRunConfigSchema, { gemms: { wgrad: { rotaton: 'hadamard' } } }), /\.gemms\.wgrad\.rotaton: expected no such field/);
  const change = check(nextRunConfigSchema, { gemms: { wgrad: { rotation: 'hadamard', hadamardBlock: 16 } }, seed: 7 });
  const merged = mergeRunConfig(config, change);
  assert.equal(merged.gemms.wgrad.rotation, 'hadamard');
  assert.equal(merged.gemms.fprop.rotation, 'none');
  assert.equal(merged.seed, 7);
  assert.equal(config.gemms.wgrad.rotation, 'none', 'base config is not mutated');
});

test('float32Digits names every float32 exactly in at most 9 significant digits', () => {
  // Seeded, so a failure names a value that fails again on the next run.
  const rng = new Rng(0x5eed);
  const words = new Uint32Array(20_000);
  for (let i = 0; i < words.length; i++) words[i] = rng.nextU32();
  const values = [...new Float32Array(words.buffer)].filter(Number.isFinite);
  values.push(0, 2 ** -149, -(2 ** -149), 3.4028234663852886e38, 1.1754943508222875e-38, Math.fround(0.1));
  for (const x of values) {
    const sent = float32Digits(x);
    assert.equal(Math.fround(Number(JSON.parse(JSON.stringify(sent)))), x, `${x} came back as ${sent}`);
    const digits = sent.toExponential().split('e')[0]!.replace(/[-.]/g, '').length;
    assert.ok(digits <= 9, `${x} sent as ${sent}: ${digits} significant digits`);
  }
});

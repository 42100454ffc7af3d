// The start-up warm-up (src/trainer/warm-up.ts) must leave training exactly as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Trainer } from '../../src/trainer/trainer.js';
import { warmUpTrainer } from '../../src/trainer/warm-up.js';
import type { StepRecord, TelemetryRecord } from '../../src/protocol/telemetry.js';
import { ALL_MXFP4, microConfig } from './micro.js';

function losses(): number[] {
  const trainer = new Trainer(microConfig({ fprop: ALL_MXFP4, dgrad: ALL_MXFP4, wgrad: ALL_MXFP4 }), 'run');
  const seen: number[] = [];
  for (let step = 0; step < 4; step++) trainer.step((record: TelemetryRecord) => record.type === 'step' && seen.push((record as StepRecord).loss as number));
  return seen;
}

test('a warm-up between two identical runs changes neither their losses nor the kernels in use', () => {
  const before = losses();
  const ms = warmUpTrainer();
  assert.ok(ms > 0, `warm-up reported ${ms} ms`);
  assert.deepEqual(losses(), before);
  assert.equal(before.length, 4);
});

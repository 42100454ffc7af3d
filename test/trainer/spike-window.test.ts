// After a loss or gradient-norm spike the trainer takes layer stats at every step for a window,
// announces it on the step record (denseStats, protocol 1.1), and — before applying the suspicious
// update — hands the run a chance to keep a checkpoint of the weights from before it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { telemetryRecordSchema, type StepRecord, type TelemetryRecord } from '../../src/protocol/telemetry.js';
import { DENSE_STATS_WINDOW, SpikeDetector } from '../../src/trainer/spike.js';
import { Trainer } from '../../src/trainer/trainer.js';
import { microConfig } from './micro.js';

test('the spike rule: quiet warm-up, then a jump far above the running range', () => {
  const detector = new SpikeDetector();
  for (let i = 0; i < 30; i++) assert.equal(detector.observe(3 + 0.01 * Math.sin(i)), false);
  assert.equal(detector.observe(3.5), true);
  assert.equal(detector.observe(3.0), false, 'the spike did not widen the range');
});

test('a gradient spike: the update is not yet applied when onSuspicious runs, and stats come every step for the window', () => {
  const config = { ...microConfig({}), steps: 80, statsEvery: 10 };
  const trainer = new Trainer(config, 'spike-run');
  const records: TelemetryRecord[] = [];
  const emit = (record: TelemetryRecord) => records.push(check(telemetryRecordSchema, record));
  for (let i = 0; i < 30; i++) trainer.step(emit);
  // Blow the weights up: the next step's loss and gradient norm jump.
  for (const param of trainer.model.params) for (let i = 0; i < param.data.length; i++) param.data[i]! *= 1.5;
  const calls: { step: number; reason: string; first: number }[] = [];
  trainer.onSuspicious = (step, reason) => calls.push({ step, reason, first: trainer.model.params[0]!.data[0]! });
  const before = trainer.model.params[0]!.data[0]!;
  trainer.step(emit);
  assert.equal(calls.length, 1, 'the spike step is suspicious');
  assert.equal(calls[0]!.step, 30);
  assert.match(calls[0]!.reason, /(loss|gradient-norm) spike at step 30/);
  assert.equal(calls[0]!.first, before, 'called before the optimizer touched the weights');
  const spikeStep = records.find((r): r is StepRecord => r.type === 'step' && r.step === 30)!;
  assert.deepEqual(spikeStep.denseStats?.until, 30 + DENSE_STATS_WINDOW);
  // The blown-up weights may diverge a few steps later (a diverged step has no stats): check up to there.
  let lastGood = 30;
  let divergedAt: number | undefined;
  for (let i = 0; i < 25; i++) {
    const outcome = trainer.step(emit);
    if (outcome.diverged !== undefined) {
      divergedAt = outcome.step;
      break;
    }
    lastGood = outcome.step;
  }
  assert.ok(lastGood >= 31, `the run went on after the spike (to step ${lastGood})`);
  const statsSteps = [...new Set(records.filter((r) => r.type === 'layerStats').map((r) => r.step))];
  for (let step = 30; step <= Math.min(lastGood, 30 + DENSE_STATS_WINDOW); step++) assert.ok(statsSteps.includes(step), `layer stats at step ${step} in the window`);
  if (lastGood > 30 + DENSE_STATS_WINDOW + 1) assert.ok(!statsSteps.includes(30 + DENSE_STATS_WINDOW + 1), 'back to every 10 steps after it');
  assert.equal(calls.filter((call) => call.reason.includes('spike')).length, 1, 'one checkpoint per window even if later steps spike too');
  // A divergence inside the window still keeps its own checkpoint, from just before the diverging update.
  assert.deepEqual(calls.slice(1).map((call) => call.step), divergedAt === undefined ? [] : [divergedAt]);
});

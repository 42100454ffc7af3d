import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MIN_BASELINE_STEPS, RECENT_STEPS, RecentStepTimes, telemetryCost } from '../../src/store/step-cost.js';

/** A run's step times: `ms(step)` for steps 0…count−1, stats every `every` steps. */
function run(count: number, every: number, ms: (step: number) => number): RecentStepTimes {
  const times = new RecentStepTimes();
  for (let step = 0; step < count; step++) {
    times.addStep(step, ms(step));
    if (step % every === 0) times.addStatsStep(step);
  }
  return times;
}

const bridgeLike = (step: number) => (step % 10 === 0 ? 160 : (step + 1) % 10 === 0 ? 130 : 100);

test('the cost weighs each kind of step by its count against the steps without telemetry, over whole blocks', () => {
  const cost = run(100, 10, bridgeLike).cost()!;
  // Steps 0…89, up to the newest stats step (90): 9 stats steps, 9 before one, 72 others.
  assert.deepEqual([cost.statsSteps, cost.beforeStatsSteps, cost.baselineSteps], [9, 9, 72]);
  assert.deepEqual([cost.statsMs, cost.beforeStatsMs, cost.baselineMs], [160, 130, 100]);
  // bench_bridge's formula for statsEvery N: (t_stats + t_pre + (N−2)·t_off) / (N·t_off) − 1.
  assert.ok(Math.abs(cost.overhead - ((160 + 130 + 8 * 100) / (10 * 100) - 1)) < 1e-12, String(cost.overhead));
});

test('steps without a step time are counted by step number, not left out', () => {
  // Step times for every fifth step only (a Trainer's logging_steps): half of them fall on stats steps.
  const sparse = telemetryCost(Array.from({ length: 21 }, (_, i) => [5 * i, bridgeLike(5 * i)] as const), new Set(Array.from({ length: 11 }, (_, i) => 10 * i)))!;
  assert.deepEqual([sparse.statsSteps, sparse.beforeStatsSteps, sparse.baselineSteps], [10, 10, 80]);
  assert.equal(sparse.beforeStatsMs, undefined, 'no step before a stats step sent its time');
  assert.ok(Math.abs(sparse.overhead - ((160 + 100 + 8 * 100) / (10 * 100) - 1)) < 1e-12, String(sparse.overhead));
});

test('medians keep one slow step (a checkpoint save, an evaluation) out of the cost', () => {
  const clean = run(100, 10, bridgeLike).cost()!;
  const withSave = run(100, 10, (step) => (step === 55 ? 5000 : bridgeLike(step))).cost()!;
  assert.equal(withSave.baselineMs, clean.baselineMs);
  assert.equal(withSave.overhead, clean.overhead);
});

test('no cost without stats steps, or without enough steps that send none', () => {
  assert.equal(run(100, 1, () => 100).cost(), undefined, 'statsEvery 1: every step measures, none is a baseline');
  assert.equal(telemetryCost([[0, 100], [1, 100], [2, 100]], new Set()), undefined, 'no stats step');
  // A run's first stats step compiles kernels: until MIN_STATS_STEPS are timed it would set the median alone.
  const compiling = (step: number) => (step === 0 ? 30_000 : bridgeLike(step));
  assert.equal(run(21, 10, compiling).cost(), undefined, 'stats steps 0 and 10 timed, before the newest (20)');
  assert.equal(run(31, 10, compiling).cost()!.statsMs, 160, 'three timed: the median leaves the first out');
  // Stats at 0, 1, 2 and 6: steps 3 and 4 are the baseline; with fewer than MIN_BASELINE_STEPS of them, none.
  const tooFew = telemetryCost(Array.from({ length: 11 }, (_, step) => [step, 100] as const), new Set([0, 1, 2, MIN_BASELINE_STEPS + 1]));
  assert.equal(tooFew, undefined, `${MIN_BASELINE_STEPS - 3} baseline steps`);
  assert.ok(telemetryCost(Array.from({ length: 11 }, (_, step) => [step, 100] as const), new Set([0, 1, 2, MIN_BASELINE_STEPS + 4])), 'enough baseline steps');
});

test('a stretch of dense stats (every step, after a loss spike) counts as stats steps', () => {
  const times = run(100, 10, bridgeLike);
  for (let step = 100; step < 120; step++) {
    times.addStep(step, 200);
    times.addStatsStep(step);
  }
  const cost = times.cost()!;
  assert.equal(cost.statsSteps, 10 + 19, 'steps 0…90 by cadence, 100…118 dense (119, the newest, closes the window)');
  assert.equal(cost.baselineMs, 100);
  assert.ok(cost.overhead > run(100, 10, bridgeLike).cost()!.overhead);
});

test('only the newest steps count, and what is kept stays bounded', () => {
  // 10,000 steps; from step 5,000 on every step takes twice as long, stats steps too.
  const times = run(10_000, 10, (step) => bridgeLike(step) * (step >= 5000 ? 2 : 1));
  const cost = times.cost()!;
  assert.deepEqual([cost.statsMs, cost.beforeStatsMs, cost.baselineMs], [320, 260, 200]);
  assert.ok(cost.statsSteps + cost.beforeStatsSteps + cost.baselineSteps <= RECENT_STEPS);
  const internals = times as unknown as { times: unknown[]; stats: Set<number> };
  assert.ok(internals.times.length <= RECENT_STEPS && internals.stats.size <= RECENT_STEPS, `${internals.times.length} ${internals.stats.size}`);
  // Dense stats for longer than the window: the set stays bounded too.
  const dense = run(5 * RECENT_STEPS, 1, () => 100) as unknown as { stats: Set<number> };
  assert.ok(dense.stats.size <= RECENT_STEPS, String(dense.stats.size));
});

test('step times too large to add up give no cost rather than an infinite one', () => {
  const huge = run(100, 10, (step) => (step % 10 === 0 ? Number.MAX_VALUE : 100));
  assert.equal(huge.cost(), undefined);
  assert.equal(run(100, 10, (step) => (step % 10 === 0 ? 50 : 0)).cost(), undefined, 'steps of 0 ms: nothing to divide by');
});

// "Set Stats Cadence and Coverage…": the intervals and coverages offered, the change a choice sends,
// what earlier runs measured a choice to cost, and what the next run then shows in the Runs view.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check, mergeRunConfig, nextRunConfigSchema, runConfigSchema, type RunConfig } from '../../src/protocol/index.js';
import { configRows } from '../../src/host/model/run-tree.js';
import { quickActions, statusText } from '../../src/host/model/status-text.js';
import {
  COVERAGE_CHOICES,
  coverageChange,
  coverageOf,
  coverageSummary,
  intervalChoices,
  measuredCost,
  type MeasuredRun,
} from '../../src/host/model/stats-coverage.js';
import { RunStore } from '../../src/store/run-store.js';
import type { TelemetryCost } from '../../src/store/step-cost.js';
import { baseConfig } from '../link/fake-run.js';

const cost = (overhead: number): TelemetryCost => ({ overhead, statsMs: 350, beforeStatsMs: 290, baselineMs: 221, statsSteps: 50, beforeStatsSteps: 50, baselineSteps: 400 });
const config = (statsEvery: number, extra: Partial<RunConfig> = {}): RunConfig => ({ ...baseConfig, statsEvery, ...extra });

test('the intervals offered are 10, 20, 50 and 100 steps, and the current one where it is another', () => {
  assert.deepEqual(intervalChoices(10), [10, 20, 50, 100]);
  assert.deepEqual(intervalChoices(undefined), [10, 20, 50, 100]);
  assert.deepEqual(intervalChoices(30), [10, 20, 30, 50, 100]);
  assert.deepEqual(intervalChoices(500), [10, 20, 50, 100, 500]);
});

test('the coverages offered: every layer exactly first, then layer groups, sampled Wgrad rows and no lag-1, each saying what it gives up', () => {
  assert.deepEqual(
    COVERAGE_CHOICES.map((c) => [c.statsLayerGroups, c.wgradErrorRowStride, c.wgradErrorLag1]),
    [[1, 1, true], [2, 1, true], [4, 1, true], [8, 1, true], [1, 4, true], [1, 8, true], [1, 1, false]],
  );
  assert.equal(COVERAGE_CHOICES[6]!.label, 'Every layer, no lag-1 (opt-in)');
  assert.match(COVERAGE_CHOICES[6]!.detail, /no lag-1 cosine; the step before a stats step is free$/);
  assert.match(COVERAGE_CHOICES[0]!.label, /default/);
  assert.equal(new Set(COVERAGE_CHOICES.map((c) => c.label)).size, COVERAGE_CHOICES.length, 'no two read alike');
  for (const choice of COVERAGE_CHOICES.slice(1)) assert.match(choice.detail, /^Python bridge: /, `${choice.label} says where it applies`);
  for (const choice of COVERAGE_CHOICES) assert.ok(choice.detail.length <= 90, `${choice.label}: the picker shows about 90 characters of a detail`);
  assert.match(COVERAGE_CHOICES[4]!.label, /1 in 4 rows \(estimate\)/);
  assert.match(COVERAGE_CHOICES[2]!.detail, /layers take turns in 4 groups, each every 4 stats steps; values exact/);
  assert.match(COVERAGE_CHOICES[5]!.detail, /Wgrad error from every 8th row of ∇W$/);
});

test('a choice sends the interval and the opt-ins it changes, so going back to every layer turns them off; the next run shows it in the Runs view', () => {
  const grouped = coverageChange(20, COVERAGE_CHOICES[2]!);
  assert.deepEqual(check(nextRunConfigSchema, grouped), { statsEvery: 20, statsLayerGroups: 4 });
  assert.deepEqual(coverageChange(50, COVERAGE_CHOICES[0]!, coverageOf(baseConfig)), { statsEvery: 50 }, 'an interval alone: what a trainer before protocol 1.6 takes');
  const next = mergeRunConfig(baseConfig, grouped);
  check(runConfigSchema, next);
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'g', name: 'grouped', startedAt: 't', trainer: { name: 'bridge', version: '1' }, config: next, layers: [] });
  assert.equal(configRows(store.list()[0]!).find((r) => r.label === 'stats every')?.value, '20 steps, 1 of 4 layer groups each (a layer every 80 steps)');

  const sampled = mergeRunConfig(next, coverageChange(10, COVERAGE_CHOICES[4]!, coverageOf(next)));
  store.ingest({ type: 'runStarted', runId: 's', name: 'sampled', startedAt: 't', trainer: { name: 'bridge', version: '1' }, config: sampled, layers: [] });
  const rows = configRows(store.list()[1]!);
  assert.equal(rows.find((r) => r.label === 'stats every')?.value, '10 steps', 'the layer groups are off again');
  assert.equal(rows.find((r) => r.label === 'Wgrad error rows')?.value, '1 in 4 (estimate)');

  assert.deepEqual(coverageChange(10, COVERAGE_CHOICES[4]!, coverageOf(next)), { statsEvery: 10, statsLayerGroups: 1, wgradErrorRowStride: 4 });
  const back = mergeRunConfig(sampled, coverageChange(10, COVERAGE_CHOICES[0]!, coverageOf(sampled)));
  assert.deepEqual(coverageOf(back), { statsLayerGroups: 1, wgradErrorRowStride: 1, wgradErrorLag1: true });
  store.ingest({ type: 'runStarted', runId: 'e', name: 'exact', startedAt: 't', trainer: { name: 'bridge', version: '1' }, config: back, layers: [] });
  assert.ok(!configRows(store.list()[2]!).some((r) => r.label === 'Wgrad error rows'), 'exact again: no estimate row');
});

test('no lag-1 sends wgradErrorLag1 false, and every layer exactly turns it on again; the next run shows it in the Runs view', () => {
  const off = coverageChange(10, COVERAGE_CHOICES[6]!, coverageOf(baseConfig));
  assert.deepEqual(check(nextRunConfigSchema, off), { statsEvery: 10, wgradErrorLag1: false });
  const next = mergeRunConfig(baseConfig, off);
  assert.equal(check(runConfigSchema, next).wgradErrorLag1, false);
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'n', name: 'no lag-1', startedAt: 't', trainer: { name: 'bridge', version: '1' }, config: next, layers: [] });
  assert.equal(configRows(store.list()[0]!).find((r) => r.label === 'Wgrad error lag-1')?.value, 'off (opt-in: no step before a stats step measured)');
  assert.match(statusText({ state: 'connected', url: 'ws://x', run: undefined, nextRunConfig: next }).tooltip, /^next run: all mxfp4 · stats every 10 steps · no lag-1 \(opt-in\)$/m);
  const on = coverageChange(10, COVERAGE_CHOICES[0]!, coverageOf(next));
  assert.deepEqual(on, { statsEvery: 10, wgradErrorLag1: true });
  assert.equal(mergeRunConfig(next, on).wgradErrorLag1, true);
  assert.equal(coverageSummary(10, { statsLayerGroups: 4, wgradErrorRowStride: 1, wgradErrorLag1: false }), 'every 10 steps · 4 layer groups, Wgrad error from 1 in 1 rows, no lag-1');
});

test('each choice quotes the newest run that measured it at that interval; absent opt-ins count as 1', () => {
  const runs: MeasuredRun[] = [
    { name: 'old exact', config: config(10), cost: cost(0.091) },
    { name: 'groups', config: config(10, { statsLayerGroups: 4 }), cost: cost(0.023) },
    { name: 'new exact', config: config(10, { statsLayerGroups: 1, wgradErrorRowStride: 1 }), cost: cost(0.082) },
    { name: 'exact at 100', config: config(100), cost: cost(0.008) },
    { name: 'not measured yet', config: config(10, { wgradErrorRowStride: 4 }), cost: undefined },
    { name: 'no lag-1', config: config(10, { wgradErrorLag1: false }), cost: cost(0.052) },
    { name: 'no config yet', config: undefined, cost: cost(0.5) },
  ];
  assert.equal(measuredCost(runs, 10, COVERAGE_CHOICES[0]!), 'measured +8.2 % in new exact');
  assert.equal(measuredCost(runs, 10, COVERAGE_CHOICES[2]!), 'measured +2.3 % in groups');
  assert.equal(measuredCost(runs, 100, COVERAGE_CHOICES[0]!), 'measured +0.8 % in exact at 100');
  assert.equal(measuredCost(runs, 20, COVERAGE_CHOICES[0]!), undefined, 'no run at that interval');
  assert.equal(measuredCost(runs, 10, COVERAGE_CHOICES[4]!), undefined, 'a run without a cost yet is not quoted');
  assert.equal(measuredCost(runs, 10, COVERAGE_CHOICES[6]!), 'measured +5.2 % in no lag-1');
});

test('the confirmation says the interval and the coverage in the words of the picker', () => {
  assert.equal(coverageSummary(20, COVERAGE_CHOICES[0]!), 'every 20 steps · Every layer, exact (default)');
  assert.equal(coverageSummary(10, COVERAGE_CHOICES[5]!), 'every 10 steps · Wgrad error from 1 in 8 rows (estimate)');
  assert.equal(coverageSummary(10, { statsLayerGroups: 3, wgradErrorRowStride: 2, wgradErrorLag1: true }), 'every 10 steps · 3 layer groups, Wgrad error from 1 in 2 rows');
  assert.equal(coverageSummary(10, COVERAGE_CHOICES[6]!), 'every 10 steps · Every layer, no lag-1 (opt-in)');
});

test('the quick actions offer it after the scale rule, in every connection state', () => {
  for (const [state, running] of [[undefined, false], ['connected', false], ['connected', true]] as const) {
    const commands = quickActions(state, running).map((a) => a.command);
    const at = commands.indexOf('mxscope.setStatsCoverage');
    assert.ok(at > 0 && commands[at - 1] === 'mxscope.setScaleRule', `${state} ${running}: ${commands.join()}`);
  }
});

test("the status bar's tooltip says how often and what the next run measures, and the running run too", () => {
  const next = mergeRunConfig(baseConfig, coverageChange(20, COVERAGE_CHOICES[2]!));
  const idle = statusText({ state: 'connected', url: 'ws://x', run: undefined, nextRunConfig: next });
  assert.match(idle.tooltip, /^next run: all mxfp4 · stats every 20 steps, 1 of 4 layer groups each \(a layer every 80 steps\)$/m);
  const sampled = mergeRunConfig(baseConfig, coverageChange(10, COVERAGE_CHOICES[5]!));
  assert.match(statusText({ state: 'connected', url: 'ws://x', run: undefined, nextRunConfig: sampled }).tooltip, /^next run: all mxfp4 · stats every 10 steps · Wgrad error from 1 in 8 rows \(estimate\)$/m);
  // Layer groups and lag-1 off together (the bridge's run_config allows it; the picker does not offer it): no "every layer" beside the groups.
  const groupsNoLag1 = mergeRunConfig(baseConfig, coverageChange(10, { statsLayerGroups: 4, wgradErrorRowStride: 1, wgradErrorLag1: false }));
  assert.match(statusText({ state: 'connected', url: 'ws://x', run: undefined, nextRunConfig: groupsNoLag1 }).tooltip,
    /^next run: all mxfp4 · stats every 10 steps, 1 of 4 layer groups each \(a layer every 40 steps\) · no lag-1 \(opt-in\)$/m);
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'r', name: 'running', startedAt: 't', trainer: { name: 'bridge', version: '1' }, config: baseConfig, layers: [] });
  const running = statusText({ state: 'connected', url: 'ws://x', run: store.list()[0], nextRunConfig: next });
  assert.match(running.tooltip, /^this run: all mxfp4 · stats every 5 steps$/m);
  assert.match(running.tooltip, /^next run: .* · stats every 20 steps, 1 of 4 layer groups each/m);
});

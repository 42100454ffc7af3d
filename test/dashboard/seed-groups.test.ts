import { test } from 'node:test';
import assert from 'node:assert/strict';
import { extraPctInterval, indistinguishable, meanInterval, t975 } from '../../src/shared/intervals.js';
import { meanBand, seedGroups } from '../../webview/dashboard/model/seed-groups.js';
import type { RunInfo } from '../../src/protocol/webview.js';

const info = (runId: string, seedGroup: string, seed: number): RunInfo => ({ runId, name: runId, status: 'completed', startedAt: '', gemms: { fprop: 'x', dgrad: 'x', wgrad: 'x' }, tokensPerStep: 1, statsEvery: 1, layers: [], divergedAt: null, seed, seedGroup });

test('runs differing only in seed group; a lone config is no group; a repeated seed counts once', () => {
  const groups = seedGroups([info('a1', 'A', 1), info('b1', 'B', 1), info('a2', 'A', 2), info('a2again', 'A', 2), info('c', 'C', 1)]);
  assert.deepEqual(groups.map((g) => [g.key, g.runs.map((r) => r.runId)]), [['A', ['a1', 'a2']]]);
});

test('mean band at common steps, sample sd', () => {
  const band = meanBand([{ xs: [0, 1, 2], ys: [1, 2, 3] }, { xs: [0, 1, 2, 3], ys: [3, null, 5, 9] }]);
  assert.deepEqual(band.xs, [0, 2], 'step 1 has a gap in one run; step 3 only one run has');
  assert.deepEqual(band.mean, [2, 4]);
  assert.ok(Math.abs(band.hi[0]! - (2 + Math.SQRT2)) < 1e-12);
});

test('95 % intervals: t quantiles, a difference inside seed noise is not distinguishable', () => {
  assert.equal(t975(2), 4.303);
  const m = meanInterval([10, 12, 14]);
  assert.equal(m.mean, 12);
  assert.ok(Math.abs(m.hi - m.lo - 2 * 4.303 * (2 / Math.sqrt(3))) < 1e-9);
  // Seeds spread ±15 % around the baseline: −14.8 % and +3.4 % readings are the same recipe.
  const noisy = extraPctInterval([85.2, 103.4, 99], [100, 96, 104]);
  assert.ok(noisy && indistinguishable(noisy), JSON.stringify(noisy));
  const clear = extraPctInterval([130, 131, 129], [100, 101, 99]);
  assert.ok(clear && !indistinguishable(clear) && clear.lo > 25, JSON.stringify(clear));
  assert.ok(!Number.isFinite(extraPctInterval([120], [100])!.hi), 'one run against one run: no interval');
});

// The ablation's arithmetic: tokens to a target loss (interpolated), the default target, the table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ValidationRecord } from '../../src/protocol/telemetry.js';
import { ABLATION_SERIES, defaultTarget, formatAblationTable, tokensToTarget } from '../../src/trainer/ablation.js';

const curve = (losses: (number | null)[]): ValidationRecord[] => losses.map((loss, i) => ({ type: 'validation', runId: 'r', step: 10 * i + 9, tokens: 1000 * (i + 1), loss }));

test('tokens to target interpolate between the evaluations around the crossing', () => {
  assert.equal(tokensToTarget(curve([4, 3, 2]), 3), 2000);
  assert.equal(tokensToTarget(curve([4, 3, 2]), 2.5), 2500);
  assert.equal(tokensToTarget(curve([4, 3, 2]), 5), 1000, 'reached at the first evaluation');
  assert.equal(tokensToTarget(curve([4, 3, 2]), 1), undefined);
  assert.equal(tokensToTarget(curve([4, null, 2]), 2), undefined, 'a diverged curve never reaches it');
});

test('the default target is the baseline loss halfway through its run', () => {
  assert.equal(defaultTarget(curve([6, 5, 4, 3, 2, 1])), 4);
  assert.equal(defaultTarget(curve([6, 5, 4, 3, 2])), 4);
  assert.equal(defaultTarget([]), undefined);
});

test('the table lists every run with its extra tokens against the baseline', () => {
  const ended = { type: 'runEnded', runId: 'r', step: 29, status: 'completed', reason: '', endedAt: '' } as const;
  const results = [
    { label: ABLATION_SERIES[0]!.label, runId: 'a', ended, validation: curve([4, 3, 2]) },
    { label: ABLATION_SERIES[3]!.label, runId: 'b', ended, validation: curve([4, 3.5, 2.5]) },
    { label: ABLATION_SERIES[6]!.label, runId: 'c', ended, validation: curve([4, 3.8, 3.6]) },
  ];
  const lines = formatAblationTable(results, 3, 3000).split('\n');
  assert.equal(lines.length, 5);
  assert.match(lines[0]!, /tokens to val loss 3\.0000.*extra tokens/);
  assert.match(lines[2]!, /^FP8 baseline\s+2000\s+0\.0%/);
  assert.match(lines[3]!, /^\+Wgrad MXFP4 \(full\)\s+2500\s+25\.0%/);
  assert.match(lines[4]!, /^full \+ Hadamard H16\s+not reached \(> 3000\)\s+> 50\.0%/);
});

test('the series ends with the production rotation: full MXFP4 with a fixed random-sign H16 on Wgrad', () => {
  assert.equal(ABLATION_SERIES.length, 8);
  const last = ABLATION_SERIES.at(-1)!;
  assert.equal(last.label, 'full + fixed random-sign H16');
  assert.deepEqual([last.gemms.fprop.precision, last.gemms.dgrad.precision, last.gemms.wgrad.precision], ['mxfp4', 'mxfp4', 'mxfp4']);
  assert.deepEqual([last.gemms.wgrad.rotation, last.gemms.wgrad.hadamardBlock, last.gemms.wgrad.rounding], ['fixed-sign-hadamard', 16, 'nearest-even']);
  assert.equal(new Set(ABLATION_SERIES.map((run) => run.label)).size, 8, 'labels are distinct');
});

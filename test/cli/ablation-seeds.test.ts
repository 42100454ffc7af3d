// mxscope-train --ablation --seeds N: the flag's parsing and the across-seed table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatSeedTable } from '../../src/cli/ablation-seeds.js';
import { CliError, parseCliArgs } from '../../src/cli/train-args.js';
import type { AblationResult } from '../../src/trainer/ablation.js';

test('--seeds N goes with --ablation only, 1..32', () => {
  const command = parseCliArgs(['--ablation', '--seeds', '3']);
  assert.ok(command.kind === 'ablation' && command.seeds === 3);
  const single = parseCliArgs(['--ablation']);
  assert.ok(single.kind === 'ablation' && single.seeds === 1);
  assert.throws(() => parseCliArgs(['--seeds', '3']), (e: Error) => e instanceof CliError && /--seeds only applies with --ablation/.test(e.message));
  assert.throws(() => parseCliArgs(['--ablation', '--seeds', '0']), /--seeds: "0" is not an integer in \[1, 32\]/);
});

/** A result whose validation loss falls linearly from 4 to 2 over `tokensToHalf`·2 tokens. */
function result(label: string, tokensTo3: number): AblationResult {
  const validation = [0, 1, 2].map((i) => ({ type: 'validation' as const, runId: label, step: i, tokens: i * tokensTo3, loss: 4 - i }));
  return { label, runId: label, ended: { type: 'runEnded', runId: label, step: 2, status: 'completed', reason: '', endedAt: '' }, validation };
}

test('the seed table: mean ± 95 % interval, extra tokens with an interval, and the verdict', () => {
  const bySeed = [
    [result('FP8 baseline', 1000), result('noisy', 900), result('worse', 1500)],
    [result('FP8 baseline', 1100), result('noisy', 1150), result('worse', 1600)],
    [result('FP8 baseline', 950), result('noisy', 1040), result('worse', 1550)],
  ];
  const table = formatSeedTable(bySeed, 3);
  const line = (label: string) => table.split('\n').find((row) => row.startsWith(label))!;
  assert.match(line('FP8 baseline'), /3\/3\s+1017 ± \d+\s+baseline/);
  assert.match(line('noisy'), /[+-]\d+\.\d% \[-\d+\.\d%, \+\d+\.\d%\]\s+not distinguishable from the baseline/);
  assert.match(line('worse'), /\+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\]$/);
});

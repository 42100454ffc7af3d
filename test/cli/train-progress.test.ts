// The CLI's console lines number steps as the protocol does (0-based), so "diverged at step 24"
// from mxscope-train is the step the dashboard's alert and divergence marker show.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProgressReporter } from '../../src/cli/train-progress.js';

test('the CLI names the same divergence step as the dashboard', () => {
  let out = '';
  const stream = { isTTY: false, write: (text: string) => ((out += text), true) } as unknown as NodeJS.WriteStream;
  const progress = new ProgressReporter(stream, 300, 'mxscope-train');
  progress.onRecord({ type: 'step', runId: 'r', step: 19, tokens: 20, loss: 3.1, lr: 1e-3, gradNorm: 1, stepMs: 5 });
  progress.onRecord({ type: 'step', runId: 'r', step: 24, tokens: 25, loss: 12.3, lr: 1e-3, gradNorm: 1, stepMs: 5 });
  progress.onRecord({ type: 'runEnded', runId: 'r', step: 24, status: 'diverged', reason: 'loss 12.300 is more than 3 above its running minimum', endedAt: 't' });
  assert.match(out, /^step 19 \(20\/300\) loss 3\.1000/m);
  assert.match(out, /mxscope-train: diverged at step 24: loss 12\.300/);
});

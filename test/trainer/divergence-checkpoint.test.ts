// A run that jumps straight to divergence (no loss spike first, as in issue 14: 3.13 → 12.3 in one
// step) still keeps a checkpoint from before the diverging update; the divergence alert and its
// notification name it, and a next run can start from it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { NoticeFilter } from '../../src/dashboard/notice.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { readRunLog } from '../../src/runlog/index.js';
import { startRun } from '../../src/trainer/index.js';
import { microConfig } from './micro.js';

test('a direct divergence keeps a checkpoint from before the diverging update, named by the alert and the notification', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-diverge-'));
  const hot = microConfig();
  hot.steps = 50;
  hot.optimizer = { ...hot.optimizer, lr: 50, clip: 0 };
  const run = startRun({ config: hot, outDir });
  const ended = await run.done;
  assert.equal(ended.status, 'diverged');
  const { records } = await readRunLog(run.dir);
  const steps = records.flatMap((r) => (r.type === 'step' ? [r] : []));
  assert.ok(steps.every((r) => r.denseStats === undefined), 'no spike came first: the run went straight to divergence');
  assert.ok(ended.step < 20, `it diverged before the spike rule's 20-step warm-up could fire (step ${ended.step})`);

  const saved = records.flatMap((r) => (r.type === 'checkpointSaved' ? [r] : []));
  assert.equal(saved.length, 1, 'one checkpoint, kept on the diverging step');
  const kept = saved[0]!;
  assert.equal(kept.step, ended.step - 1, 'its weights are those after the step before the divergence');
  assert.match(kept.reason ?? '', new RegExp(`before the suspicious update at step ${ended.step} \\(divergence at step ${ended.step}: loss`));
  assert.ok(existsSync(kept.path), `the file exists: ${kept.path}`);
  const divergingStep = records.findIndex((r) => r.type === 'step' && r.step === ended.step);
  assert.ok(records.indexOf(kept) < divergingStep, 'logged before the diverging step, so its alert can name it');

  const alerts = new AlertTracker();
  const raised = records.flatMap((r: TelemetryRecord) => alerts.ingest(r));
  const divergence = raised.find((a) => a.kind === 'divergence')!;
  assert.equal(divergence.step, ended.step);
  assert.equal(divergence.checkpoint, kept.path);
  assert.ok(divergence.message.includes(`Checkpoint from before it (step ${kept.step}): ${kept.path}`), divergence.message);
  const notice = new NoticeFilter().notice(divergence, 'hot')!;
  assert.equal(notice.checkpoint, kept.path, 'the notification offers "Start Next Run from Checkpoint…" with it');
  assert.ok(notice.message.includes(kept.path), notice.message);

  const calm = microConfig();
  calm.steps = ended.step + 1;
  const resumed = startRun({ config: calm, outDir, resumeFrom: kept.path });
  assert.equal((await resumed.done).status, 'completed');
  const first = (await readRunLog(resumed.dir)).records[0]!;
  assert.ok(first.type === 'runStarted' && first.resumedFrom?.step === ended.step, 'the next run starts at the diverging step');
  rmSync(outDir, { recursive: true, force: true });
});

test('a spike-free run that never diverges keeps no checkpoint of its own (only the final one)', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-calm-'));
  const run = startRun({ config: { ...microConfig(), steps: 6 }, outDir });
  assert.equal((await run.done).status, 'completed');
  const saved = (await readRunLog(run.dir)).records.flatMap((r) => (r.type === 'checkpointSaved' ? [r] : []));
  assert.deepEqual(saved.map((r) => [r.step, r.reason]), [[5, undefined]]);
  rmSync(outDir, { recursive: true, force: true });
});

test('a non-finite loss: the alert raised on the step record names the checkpoint logged before it', () => {
  const alerts = new AlertTracker();
  alerts.ingest({ type: 'checkpointSaved', runId: 'r', step: 6, path: '/runs/r/checkpoints/step-00000006.safetensors', reason: 'before the suspicious update at step 7 (divergence at step 7: loss is NaN)' });
  const [divergence] = alerts.ingest({ type: 'step', runId: 'r', step: 7, tokens: 8, loss: null, lr: 1, gradNorm: null, stepMs: 1 });
  assert.equal(divergence?.kind, 'divergence');
  assert.equal(divergence?.checkpoint, '/runs/r/checkpoints/step-00000006.safetensors');
  // A checkpoint on request (no reason) is not one kept before an event: it is not named.
  const other = new AlertTracker();
  other.ingest({ type: 'checkpointSaved', runId: 'r', step: 6, path: '/p.safetensors' });
  assert.equal(other.ingest({ type: 'step', runId: 'r', step: 7, tokens: 8, loss: null, lr: 1, gradNorm: null, stepMs: 1 })[0]?.checkpoint, undefined);
});

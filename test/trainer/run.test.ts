// startRun end to end: run directory and records, checkpoints and exact resume, stop and divergence.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { readRunLog } from '../../src/runlog/index.js';
import { startRun } from '../../src/trainer/index.js';
import { microConfig } from './micro.js';

const stepLosses = (records: TelemetryRecord[]): [number, number | null][] => records.flatMap((r) => (r.type === 'step' ? [[r.step, r.loss] as [number, number | null]] : []));

test('a run logs what it streams, checkpoints, and resumes exactly where it left off', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-run-'));
  const config = { ...microConfig(), steps: 5 };
  const streamed: TelemetryRecord[] = [];
  const full = startRun({ config, outDir, checkpointEvery: 3, onRecord: (r) => streamed.push(r) });
  const ended = await full.done;
  assert.equal(ended.status, 'completed');
  assert.equal(ended.step, 4);
  const { records, warnings } = await readRunLog(full.dir);
  assert.deepEqual(warnings, []);
  assert.deepEqual(records, streamed, 'the log reopens exactly as it was streamed');
  const checkpoints = records.flatMap((r) => (r.type === 'checkpointSaved' ? [r] : []));
  assert.deepEqual(checkpoints.map((c) => c.step), [2, 4]);

  const resumed = startRun({ config, outDir, resumeFrom: checkpoints[0]!.path });
  assert.equal((await resumed.done).status, 'completed');
  const again = (await readRunLog(resumed.dir)).records;
  const started = again[0]!;
  assert.ok(started.type === 'runStarted' && started.resumedFrom?.step === 3);
  assert.deepEqual(stepLosses(again), stepLosses(records).slice(3), 'steps 3 and 4 repeat bit for bit');
  rmSync(outDir, { recursive: true, force: true });
});

test('a checkpoint on request, then aborting, stops the run; a runaway loss ends it as diverged', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-run-'));
  const controller = new AbortController();
  let saved: Promise<string> | undefined;
  const stopped = startRun({
    config: { ...microConfig(), steps: 1000 },
    outDir,
    signal: controller.signal,
    onRecord: (r) => {
      if (r.type !== 'step' || r.step !== 1) return;
      saved = stopped.saveCheckpoint();
      controller.abort();
    },
  });
  const end = await stopped.done;
  assert.deepEqual([end.status, end.step], ['stopped', 1]);
  const path = await saved!;
  const { records } = await readRunLog(stopped.dir);
  assert.deepEqual(records.flatMap((r) => (r.type === 'checkpointSaved' ? [[r.step, r.path]] : [])), [[1, path]], 'a checkpoint on request is logged');
  assert.equal(records.at(-1)!.type, 'runEnded');

  const hot = microConfig();
  hot.steps = 50;
  hot.optimizer = { ...hot.optimizer, lr: 50, clip: 0 };
  const diverged = await startRun({ config: hot, outDir }).done;
  assert.equal(diverged.status, 'diverged');
  assert.match(diverged.reason, /loss/);
  rmSync(outDir, { recursive: true, force: true });
});

test('a bad config is rejected before anything starts', () => {
  const config = microConfig();
  config.model = { ...config.model, dim: 48 };
  assert.throws(() => startRun({ config, outDir: tmpdir() }), /config.model dim \(48\) must be a multiple of the MX block size 32/);
});

test('a Hadamard block that does not divide a reduction dimension pads it, and runStarted says so', async () => {
  const block128 = { precision: 'mxfp4', rotation: 'hadamard', hadamardBlock: 128 } as const;
  const config = microConfig({ fprop: block128, dgrad: block128, wgrad: block128 });
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-pad-'));
  const run = startRun({ config, outDir });
  const ended = await run.done;
  assert.equal(ended.status, 'completed', ended.reason);
  // Read as plain JSON: the assertions below walk optional fields freely.
  const records = JSON.parse(JSON.stringify((await readRunLog(run.dir)).records));
  const started = records[0];
  const tokens = config.model.batch as number * (config.model.seqLen as number);
  for (const layer of started.layers) {
    assert.deepEqual(layer.rotationFit.fprop, layer.inFeatures % 128 ? { status: 'padded', dim: layer.inFeatures, paddedTo: Math.ceil(layer.inFeatures / 128) * 128 } : { status: 'rotated', dim: layer.inFeatures });
    assert.equal(layer.rotationFit.wgrad.dim, tokens);
  }
  const stats = records.filter((r: { type: string; gemm?: string }) => r.type === 'layerStats' && r.gemm === 'fprop');
  const padded = stats.find((r: { layer: string }) => started.layers.find((l: { name: string }) => l.name === r.layer).rotationFit.fprop.status === 'padded');
  assert.ok(padded, 'some fprop is padded in the micro model');
  const info = started.layers.find((l: { name: string }) => l.name === padded.layer);
  assert.equal(padded.operands[1].elements, info.outFeatures * info.rotationFit.fprop.paddedTo, 'the GEMM reduces over the padded, rotated operands');
  assert.ok(records.every((r: { type: string; loss?: number }) => r.type !== 'step' || Number.isFinite(r.loss)), 'training stays finite');
  rmSync(outDir, { recursive: true, force: true });
});

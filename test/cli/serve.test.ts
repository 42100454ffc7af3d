import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TrainerClient } from '../../src/link/trainer-client.js';
import { spawnTrainer } from '../../src/live/trainer-process.js';
import { readRunLog } from '../../src/runlog/index.js';
import type { ServerTelemetry } from '../../src/protocol/index.js';
import { until } from '../link/helpers.js';

test('mxscope-train --serve: listening line, a requested run streams and is logged, a run resumes from its checkpoint, SIGTERM stops it cleanly', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-serve-'));
  const trainer = await spawnTrainer({ nodePath: process.execPath, args: ['--import', 'tsx', 'src/cli/train.ts', '--serve', '--port', '0', '--out', outDir, '--preset', 'tiny'], env: { MXSCOPE_TOKEN: 'tk' } });
  const records: ServerTelemetry[] = [];
  const client = new TrainerClient({ url: trainer.info.url, token: trainer.info.token!, onTelemetry: (record) => records.push(record) });
  try {
    assert.equal(trainer.info.token, 'tk', 'the token came from MXSCOPE_TOKEN');
    await until(() => client.state === 'connected', 'connect');
    await client.request({ type: 'setNextRunConfig', change: { steps: 6, statsEvery: 5, gemms: { wgrad: { precision: 'mxfp4', rotation: 'hadamard' } } } });
    const { detail: runId } = await client.request({ type: 'startRun' });
    await until(() => records.at(-1)?.type === 'runEnded', 'first run end', 30_000);
    records.forEach((record, i) => assert.equal(record.seq, i + 1));
    const started = records[0]!;
    assert.ok(started.type === 'runStarted' && started.config.gemms.wgrad.rotation === 'hadamard' && started.runId === runId);
    assert.ok(records.some((r) => r.type === 'layerStats' && r.gemm === 'wgrad' && r.wgradError !== undefined));
    const log = await readRunLog(join(outDir, runId!));
    assert.equal(log.records.length, records.length, 'the run log holds what was streamed');

    const saved = records.find((r) => r.type === 'checkpointSaved');
    assert.ok(saved?.type === 'checkpointSaved', 'the finished run saved a checkpoint');
    await client.request({ type: 'setNextRunConfig', change: { steps: 100_000 } });
    await client.request({ type: 'startRun', fromCheckpoint: saved.path });
    await until(() => records.filter((r) => r.type === 'step').length > 8, 'second run steps', 30_000);
    const resumed = records.filter((r) => r.type === 'runStarted')[1];
    // checkpointSaved.step is the last step done; resumedFrom.step the step the resumed run continues at.
    assert.ok(resumed?.type === 'runStarted' && resumed.resumedFrom?.path === saved.path && resumed.resumedFrom.step === saved.step + 1);
  } finally {
    client.close();
    await trainer.stop(10_000);
  }
  const second = records.filter((r) => r.type === 'runStarted')[1]!;
  const log = await readRunLog(join(outDir, second.runId));
  const ended = log.records.at(-1);
  assert.equal(ended?.type === 'runEnded' && ended.status, 'stopped', 'SIGTERM stops the run and closes its log');
  rmSync(outDir, { recursive: true, force: true });
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveLink } from '../../src/host/live-link.js';
import { spawnTrainer } from '../../src/host/trainer-process.js';
import { rotationChange } from '../../src/host/model/rotation-modes.js';
import { RunStore } from '../../src/store/run-store.js';
import { until } from '../link/helpers.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('spawned trainer: changes made before connecting apply to the run, telemetry lands in the store, stop leaves no process', async () => {
  const stderr: string[] = [];
  const trainer = await spawnTrainer({ nodePath: process.execPath, args: ['--import', 'tsx', 'test/host/fake-trainer.ts', 'tok3n'], onStderr: (line) => stderr.push(line) });
  assert.equal(trainer.info.token, 'tok3n');
  const store = new RunStore();
  const logs: string[] = [];
  const link = new LiveLink(store, (line) => logs.push(line));
  try {
    assert.match(await link.changeNextRun(rotationChange('hadamard', 16, ['wgrad'])), /saved/);
    link.connect(trainer.info.url, trainer.info.token);
    await until(() => link.nextRunConfig()?.gemms.wgrad.rotation === 'hadamard' && link.connected, 'connected with pending change');
    await until(() => link.snapshot().nextRunConfig?.gemms.wgrad.hadamardBlock === 16, 'trainer echo');
    const ack = await link.request({ type: 'startRun' });
    await until(() => store.get(ack.detail!)?.summary.status === 'completed', 'run completes', 10_000);
    const run = store.get(ack.detail!)!;
    assert.equal(run.summary.config?.gemms.wgrad.rotation, 'hadamard', 'the run started with the change');
    assert.equal(run.steps().length, 40);
    assert.ok(stderr.includes('fake trainer ready'), 'stderr forwarded');
  } finally {
    link.disconnect();
    await trainer.stop();
  }
  assert.equal(alive(trainer.pid!), false, 'no orphan trainer');
});

test('a trainer that dies before listening is reported with its stderr', async () => {
  await assert.rejects(
    spawnTrainer({ nodePath: process.execPath, args: ['-e', 'console.error("bad preset: huge"); process.exit(2)'] }),
    /exited \(code 2\) before listening\nbad preset: huge/,
  );
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { LiveLink } from '../../src/live/live-link.js';
import { spawnTrainer } from '../../src/live/trainer-process.js';
import { rotationChange } from '../../src/host/model/rotation-modes.js';
import { RunStore } from '../../src/store/run-store.js';
import { until } from '../link/helpers.js';
import { baseConfig, fakeLauncher } from '../link/fake-run.js';
import { startTrainerServer } from '../../src/link/trainer-server.js';
import { mergeRunConfig } from '../../src/protocol/index.js';
import { checkEmbeddedOptIns } from '../../src/trainer/stats-opt-ins.js';

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
  const trainer = await spawnTrainer({ nodePath: process.execPath, args: ['--import', 'tsx', 'test/live/fake-trainer.ts', 'tok3n'], onStderr: (line) => stderr.push(line) });
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

test('a trainer that restarts (new session) leaves its unfinished live run unknown and the new session replays from 1', async () => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  let connections = 0;
  const hello = (sessionId: string) => JSON.stringify({ type: 'hello', seq: 0, protocol: { major: 1, minor: 0 }, trainer: { name: 't', version: '1' }, sessionId, capabilities: [], lastSeq: 0 });
  const started = (runId: string) => JSON.stringify({ seq: 1, type: 'runStarted', runId, name: runId, startedAt: '2026-01-01T00:00:00Z', trainer: { name: 't', version: '1' }, config: baseConfig, layers: [] });
  wss.on('connection', (socket) => {
    const first = ++connections === 1;
    socket.send(hello(first ? 'session-a' : 'session-b'));
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { type: string; from?: number };
      if (message.type !== 'subscribe') return;
      assert.equal(message.from, 1, 'a new session is subscribed from its start');
      socket.send(started(first ? 'old' : 'new'));
      if (first) setTimeout(() => socket.terminate(), 20);
    });
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const store = new RunStore();
  const link = new LiveLink(store, () => {});
  try {
    link.connect(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
    await until(() => store.get('new') !== undefined, 'the restarted trainer streams');
    assert.equal(store.get('old')!.summary.status, 'interrupted');
    assert.equal(store.get('new')!.summary.status, 'running');
  } finally {
    link.disconnect();
    wss.close();
  }
});

/** A trainer that refuses the stats opt-ins, as the embedded one does (token "tok"). */
function refusingOptInsServer() {
  return startTrainerServer({
    baseConfig,
    launch: fakeLauncher().launch,
    applyChange: (base, change) => {
      const merged = mergeRunConfig(base, change);
      checkEmbeddedOptIns(merged);
      return merged;
    },
    token: 'tok',
  });
}

test('a next-run change the trainer refuses is reported to whoever asked and dropped: the next run config and later changes do not carry it', async () => {
  const server = await refusingOptInsServer();
  const link = new LiveLink(new RunStore(), () => {});
  try {
    link.connect(server.url, 'tok');
    await until(() => link.connected && link.nextRunConfig() !== undefined, 'connected');
    await assert.rejects(link.changeNextRun({ statsLayerGroups: 4 }), /statsLayerGroups: the embedded trainer reports every layer .* \(got 4\) \[invalid-message\]/);
    assert.equal(link.nextRunConfig()?.statsLayerGroups, undefined, 'the refused change is not shown as the next run');
    assert.match(await link.changeNextRun({ statsEvery: 20 }), /sent to the trainer/);
    await until(() => link.nextRunConfig()?.statsEvery === 20, 'the next change is taken: it does not carry the refused one');
    assert.equal(link.nextRunConfig()?.statsLayerGroups, undefined);
  } finally {
    link.disconnect();
    await server.close();
  }
});

test('a change made while disconnected that the trainer refuses on connect is dropped and said to the refusal listeners', async () => {
  const server = await refusingOptInsServer();
  const refusals: string[] = [];
  const link = new LiveLink(new RunStore(), () => {});
  link.onDidRefuseChange((reason) => refusals.push(reason));
  try {
    assert.match(await link.changeNextRun({ wgradErrorRowStride: 4 }), /saved/);
    link.connect(server.url, 'tok');
    await until(() => refusals.length === 1, 'the refusal reaches the listener');
    assert.match(refusals[0]!, /wgradErrorRowStride: the embedded trainer computes the Wgrad error on every row .* \(got 4\)/);
    await until(() => link.nextRunConfig()?.wgradErrorRowStride === undefined, 'dropped');
  } finally {
    link.disconnect();
    await server.close();
  }
});

test('a change the connection lost before the trainer answered is said to be kept, not sent, and goes again on the next connection', async () => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  const changes: unknown[] = [];
  let connections = 0;
  wss.on('connection', (socket) => {
    const first = ++connections === 1;
    socket.send(JSON.stringify({ type: 'hello', seq: 0, protocol: { major: 1, minor: 7 }, trainer: { name: 't', version: '1' }, sessionId: 's', capabilities: [], lastSeq: 0 }));
    socket.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { type: string; id: string; change?: unknown };
      if (message.type !== 'setNextRunConfig') return;
      changes.push(message.change);
      if (first) socket.terminate();
      else socket.send(JSON.stringify({ type: 'ack', seq: 0, id: message.id, detail: 'applies at the next run start' }));
    });
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const link = new LiveLink(new RunStore(), () => {}, baseConfig);
  try {
    link.connect(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
    await until(() => link.connected, 'connected');
    assert.match(await link.changeNextRun({ statsEvery: 20 }), /^kept: the trainer did not take it/);
    assert.equal(link.nextRunConfig()?.statsEvery, 20, 'still the next run');
    await until(() => changes.length === 2, 'sent again once reconnected', 15_000);
    assert.deepEqual(changes, [{ statsEvery: 20 }, { statsEvery: 20 }]);
  } finally {
    link.disconnect();
    wss.close();
  }
});

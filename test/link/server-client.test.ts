import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { startTrainerServer } from '../../src/link/trainer-server.js';
import { TrainerClient, type ConnectionState } from '../../src/link/trainer-client.js';
import type { RunConfig, ServerTelemetry } from '../../src/protocol/index.js';
import { baseConfig, fakeLauncher } from './fake-run.js';
import { until } from './helpers.js';

function collectingClient(url: string, extra: Partial<ConstructorParameters<typeof TrainerClient>[0]> = {}) {
  const records: ServerTelemetry[] = [];
  const states: ConnectionState[] = [];
  const configs: RunConfig[] = [];
  const logs: string[] = [];
  const client = new TrainerClient({
    url,
    onTelemetry: (record) => records.push(record),
    onState: (state) => states.push(state),
    onNextRunConfig: (config) => configs.push(config),
    log: (line) => logs.push(line),
    backoff: { initialMs: 10, maxMs: 50 },
    ...extra,
  });
  return { client, records, states, configs, logs };
}

function assertConsecutive(records: ServerTelemetry[]): void {
  records.forEach((record, i) => assert.equal(record.seq, i + 1, `seq ${i + 1} expected, got ${record.seq}`));
}

test('round trip: next-run config, start, telemetry with consecutive seqs, ack and error replies', async () => {
  const fake = fakeLauncher();
  const server = await startTrainerServer({ baseConfig, launch: fake.launch });
  const { client, records, configs } = collectingClient(server.url);
  try {
    await until(() => client.state === 'connected' && configs.length > 0, 'connect + subscribe');
    assert.equal(client.hello?.protocol.major, 1);
    const configAck = await client.request({ type: 'setNextRunConfig', change: { gemms: { wgrad: { rotation: 'hadamard', hadamardBlock: 16 } }, steps: 12 } });
    assert.equal(configAck.type, 'ack');
    await until(() => configs.at(-1)?.gemms.wgrad.rotation === 'hadamard', 'nextRunConfig broadcast');
    const started = await client.request({ type: 'startRun' });
    assert.equal(started.detail, 'fake-1');
    await assert.rejects(client.request({ type: 'startRun' }), /run fake-1 is still active.*\[run-active\]/);
    await until(() => records.at(-1)?.type === 'runEnded', 'run end');
    assert.equal(fake.configs[0]!.gemms.wgrad.rotation, 'hadamard', 'the config change applied at run start');
    assert.equal(fake.configs[0]!.steps, 12);
    assert.equal(records[0]!.type, 'runStarted');
    assert.equal(records.filter((r) => r.type === 'step').length, 12);
    assert.equal(records.filter((r) => r.type === 'layerStats').length, 3 * 6);
    assertConsecutive(records);
    await assert.rejects(client.request({ type: 'stopRun' }), /no run is active.*\[no-active-run\]/);
    await assert.rejects(client.request({ type: 'saveCheckpoint' }), /\[no-active-run\]/);
  } finally {
    client.close();
    await server.close();
  }
});

test('stopRun ends the active run as stopped; saveCheckpoint acks with the path', async () => {
  const fake = fakeLauncher(5);
  const server = await startTrainerServer({ baseConfig: { ...baseConfig, steps: 10_000 }, launch: fake.launch });
  const { client, records } = collectingClient(server.url);
  try {
    await until(() => client.state === 'connected', 'connect');
    await client.request({ type: 'startRun' });
    await until(() => records.some((r) => r.type === 'step'), 'first step');
    const saved = await client.request({ type: 'saveCheckpoint' });
    assert.match(saved.detail ?? '', /\.safetensors$/);
    await client.request({ type: 'stopRun' });
    const ended = records.find((r) => r.type === 'runEnded');
    assert.equal(ended?.type === 'runEnded' && ended.status, 'stopped');
  } finally {
    client.close();
    await server.close();
  }
});

/** A TCP relay we can cut, to drop the connection the way a network or a restart would. */
async function relayTo(url: string) {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  const relay = createServer((inbound) => {
    const outbound = connect(Number(target.port), target.hostname);
    for (const socket of [inbound, outbound]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${(relay.address() as AddressInfo).port}`,
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () => new Promise<void>((resolve) => relay.close(() => resolve())),
  };
}

test('a dropped connection mid-run reconnects and resumes with no missing seq', async () => {
  const fake = fakeLauncher(1);
  const server = await startTrainerServer({ baseConfig: { ...baseConfig, steps: 150 }, launch: fake.launch });
  const relay = await relayTo(server.url);
  const { client, records, states } = collectingClient(relay.url);
  try {
    await until(() => client.state === 'connected', 'connect');
    await client.request({ type: 'startRun' });
    for (const atStep of [20, 60, 100]) {
      await until(() => records.some((r) => r.type === 'step' && r.step >= atStep), `step ${atStep}`);
      const drops = states.filter((s) => s === 'reconnecting').length;
      relay.cut();
      await until(() => states.filter((s) => s === 'reconnecting').length > drops, 'noticing the drop');
    }
    await until(() => records.at(-1)?.type === 'runEnded', 'run end', 15_000);
    assert.ok(states.filter((s) => s === 'connected').length >= 4, `reconnected each time: ${states.join(',')}`);
    assert.equal(records.length, server.lastSeq);
    assertConsecutive(records);
  } finally {
    client.close();
    await relay.close();
    await server.close();
  }
});

test('a client that connects after the run replays it from the start', async () => {
  const fake = fakeLauncher();
  const server = await startTrainerServer({ baseConfig, launch: fake.launch });
  const first = collectingClient(server.url);
  try {
    await until(() => first.client.state === 'connected', 'connect');
    await first.client.request({ type: 'startRun' });
    await until(() => first.records.at(-1)?.type === 'runEnded', 'run end');
    const late = collectingClient(server.url);
    await until(() => late.records.length === first.records.length, 'replay');
    assert.deepEqual(late.records, first.records);
    late.client.close();
  } finally {
    first.client.close();
    await server.close();
  }
});

test('replay reaches past the memory buffer through the run logs; without logs the gap is reported', async () => {
  const logDir = mkdtempSync(join(tmpdir(), 'mxscope-replay-'));
  const logged = await startTrainerServer({ baseConfig, launch: fakeLauncher(0, logDir).launch, replayBytes: 20_000 });
  const unlogged = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch, replayBytes: 20_000 });
  try {
    for (const server of [logged, unlogged]) {
      const starter = collectingClient(server.url);
      await until(() => starter.client.state === 'connected', 'connect');
      for (let run = 0; run < 2; run++) {
        await starter.client.request({ type: 'startRun' });
        await until(() => starter.records.filter((r) => r.type === 'runEnded').length === run + 1, `run ${run} end`);
      }
      starter.client.close();
    }
    const late = collectingClient(logged.url);
    await until(() => late.records.length === logged.lastSeq, 'full replay from logs + memory');
    assertConsecutive(late.records);
    assert.equal(late.records.filter((r) => r.type === 'runStarted').length, 2);
    late.client.close();

    const gappy = collectingClient(unlogged.url);
    await until(() => gappy.logs.some((line) => line.includes('are no longer held')), 'gap reported');
    assert.ok(gappy.records.length < unlogged.lastSeq && gappy.records.at(-1)?.seq === unlogged.lastSeq);
    gappy.client.close();
  } finally {
    await logged.close();
    await unlogged.close();
    rmSync(logDir, { recursive: true, force: true });
  }
});

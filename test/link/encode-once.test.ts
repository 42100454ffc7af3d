// Each telemetry record is JSON-encoded once: the trainer's encoding goes to its run log and, as
// is, into the server's frame.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startTrainerServer, type RunLauncher } from '../../src/link/trainer-server.js';
import type { RunStartedRecord } from '../../src/protocol/index.js';
import { TELEMETRY_NDJSON } from '../../src/runlog/index.js';
import { startRun } from '../../src/trainer/index.js';
import { microConfig } from '../trainer/micro.js';
import { baseConfig } from './fake-run.js';
import { until } from './helpers.js';

test('the trainer hands the server the very string it logged, for every record', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-encode-'));
  try {
    const streamed: string[] = [];
    const run = startRun({ config: { ...microConfig(), steps: 3 }, outDir, onRecord: (_record, json) => streamed.push(json ?? '(none)') });
    await run.done;
    const logged = readFileSync(join(run.dir, TELEMETRY_NDJSON), 'utf8').trimEnd().split('\n');
    // runStarted is written by the log's constructor and runEnded may end a run without a log: the rest come pre-encoded.
    assert.deepEqual(streamed.slice(1, -1), logged.slice(1, -1));
    assert.ok(streamed.length > 5);
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
});

test('the server builds the frame from the launcher\'s encoding instead of encoding the record again', async () => {
  const started: RunStartedRecord = { type: 'runStarted', runId: 'r1', name: 'r1', startedAt: new Date(0).toISOString(), trainer: { name: 'fake', version: '0' }, config: baseConfig, layers: [] };
  // An encoding JSON.stringify(record) would not produce (indented): seen on the wire only if reused.
  const launch: RunLauncher = ({ onRecord, signal }) => {
    onRecord(started, JSON.stringify(started, null, 1));
    return { runId: 'r1', done: new Promise((resolve) => signal.addEventListener('abort', resolve)), saveCheckpoint: async () => '' };
  };
  const server = await startTrainerServer({ baseConfig, launch });
  const socket = new WebSocket(server.url);
  const frames: string[] = [];
  socket.on('message', (data) => frames.push(data.toString()));
  try {
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ type: 'subscribe', id: 's', from: 1 }));
    socket.send(JSON.stringify({ type: 'startRun', id: 'go' }));
    await until(() => frames.some((frame) => frame.includes('"runStarted"')), 'the runStarted frame');
    const frame = frames.find((f) => f.includes('"runStarted"'))!;
    assert.equal(frame, `{"seq":1,${JSON.stringify(started, null, 1).slice(1)}`);
    assert.deepEqual(JSON.parse(frame), { seq: 1, ...started });
  } finally {
    socket.close();
    await server.close();
  }
});

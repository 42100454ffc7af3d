import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocketServer } from 'ws';
import type { AddressInfo } from 'node:net';
import { startTrainerServer } from '../../src/link/trainer-server.js';
import { TrainerClient } from '../../src/link/trainer-client.js';
import { formatListeningLine, parseListeningLine } from '../../src/link/listening-line.js';
import { isLoopbackHost } from '../../src/link/auth.js';
import { MAX_FRAME_BYTES, PROTOCOL_VERSION, SERVER_MESSAGE_TYPES, serverMessageSchema, type ServerTelemetry } from '../../src/protocol/index.js';
import { readFrame, telemetryFrame } from '../../src/link/frames.js';
import { syntheticLayerStats, syntheticStep } from '../fixtures/synthetic-llama8b.js';
import { Fuzzer } from '../fuzz/mutate.js';
import { isUtf8 } from 'node:buffer';
import { baseConfig, fakeLauncher } from './fake-run.js';
import { framesOfType, rawPeer, until } from './helpers.js';

test('malformed, oversized, binary and unknown frames get replies (or a logged warning) and the connection survives', async () => {
  const logs: string[] = [];
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch, log: (line) => logs.push(line) });
  const peer = await rawPeer(server.url);
  try {
    peer.socket.send('{not json');
    peer.socket.send(JSON.stringify({ type: 'subscribe', id: 'no-from-type', from: -3 }));
    peer.socket.send('x'.repeat(MAX_FRAME_BYTES + 1));
    peer.socket.send(Buffer.from([1, 2, 3]), { binary: true });
    peer.socket.send(JSON.stringify({ type: 'teleport', id: 't1' }));
    peer.socket.send(JSON.stringify({ type: 'setNextRunConfig', id: 'ok', change: { seed: 9 } }));
    await until(() => framesOfType(peer, 'ack').length === 1, 'the valid request after the bad ones');
    const errors = framesOfType(peer, 'error');
    assert.deepEqual(errors.map((e) => e.code), ['bad-json', 'invalid-message', 'frame-too-large', 'invalid-message']);
    assert.equal(errors[1]!.id, 'no-from-type', 'an invalid request is answered with its id');
    assert.match(String(errors[1]!.message), /\.from: expected an integer in \[0,/);
    assert.ok(logs.some((line) => line.includes('unknown type "teleport"')), 'unknown type logged');
    assert.equal(framesOfType(peer, 'ack')[0]!.id, 'ok');
    assert.equal(server.nextRunConfig.seed, 9);
    assert.equal(peer.closed, undefined);
  } finally {
    peer.socket.close();
    await server.close();
  }
});

test('a client hello with another major version is refused with a clear error and a close', async () => {
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch });
  const peer = await rawPeer(server.url);
  try {
    peer.socket.send(JSON.stringify({ type: 'hello', id: 'h', protocol: { major: 2, minor: 0 }, client: { name: 'future', version: '9' } }));
    await until(() => peer.closed !== undefined, 'close');
    const [error] = framesOfType(peer, 'error');
    assert.equal(error!.code, 'incompatible-version');
    assert.match(String(error!.message), new RegExp(`protocol 2\\.0 is not compatible with this server's ${PROTOCOL_VERSION.major}\\.${PROTOCOL_VERSION.minor}`));
    assert.equal(peer.closed!.code, 1002);
  } finally {
    await server.close();
  }
});

test('a client refuses a server hello of another major version and stays closed', async () => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('connection', (socket) => socket.send(JSON.stringify({ type: 'hello', seq: 0, protocol: { major: 2, minor: 1 }, trainer: { name: 'future', version: '9' }, sessionId: 's', capabilities: [], lastSeq: 0 })));
  await new Promise((resolve) => wss.once('listening', resolve));
  let detail = '';
  const client = new TrainerClient({ url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, onTelemetry: () => {}, onState: (state, why) => state === 'closed' && (detail = why ?? '') });
  try {
    await until(() => client.state === 'closed', 'refusal');
    assert.match(detail, new RegExp(`trainer speaks protocol 2\\.1; this client speaks ${PROTOCOL_VERSION.major}\\.${PROTOCOL_VERSION.minor}`));
  } finally {
    wss.close();
  }
});

test('a server frame that is not UTF-8 is dropped with an error saying so; the connection lives and the next frame arrives', async () => {
  // A step whose runId holds the byte 0xff, which no UTF-8 text contains.
  const bad = Buffer.from(telemetryFrame(syntheticStep('r?', 0), 1));
  bad[bad.indexOf('r?') + 1] = 0xff;
  let connections = 0;
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('connection', (socket) => {
    connections++;
    socket.send(JSON.stringify({ type: 'hello', seq: 0, protocol: PROTOCOL_VERSION, trainer: { name: 't', version: '1' }, sessionId: 's', capabilities: [], lastSeq: 0 }));
    socket.send(bad, { binary: false });
    socket.send(telemetryFrame(syntheticStep('r', 10), 2));
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const logs: string[] = [];
  const received: ServerTelemetry[] = [];
  const client = new TrainerClient({ url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, onTelemetry: (record) => received.push(record), log: (line) => logs.push(line) });
  try {
    await until(() => received.length === 1, 'the frame after the bad one');
    assert.equal(received[0]!.type === 'step' && received[0]!.step, 10);
    assert.ok(logs.some((line) => line.includes('dropped a server frame: frame is not valid UTF-8')), logs.join('\n'));
    assert.equal(connections, 1, 'no reconnect');
    assert.equal(client.state, 'connected');
  } finally {
    client.close();
    wss.close();
  }
});

test('readFrame decodes non-ASCII UTF-8 as UTF-8 and refuses bytes that are not UTF-8, naming it', () => {
  const read = (bytes: Buffer) => readFrame(bytes, false, serverMessageSchema, SERVER_MESSAGE_TYPES, MAX_FRAME_BYTES);
  const frame = read(Buffer.from(telemetryFrame(syntheticStep('läuft-✓-𝄞', 0), 1)));
  assert.equal(frame.kind === 'message' && frame.message.type === 'step' && frame.message.runId, 'läuft-✓-𝄞');
  for (const invalid of [[0xff], [0xc3], [0xed, 0xa0, 0x80] /* a lone surrogate */, [0xc0, 0xaf] /* overlong '/' */]) {
    const bytes = Buffer.concat([Buffer.from('{"seq":1,"type":"step","runId":"'), Buffer.from(invalid), Buffer.from('"}')]);
    assert.deepEqual(read(bytes), { kind: 'error', code: 'bad-json', message: 'frame is not valid UTF-8 (protocol v1 frames are UTF-8 JSON text); dropped' }, invalid.join(','));
  }
});

test('readFrame reads any bytes as UTF-8 would: 3,000 seeded byte edits of a frame, valid or not', () => {
  // The ASCII fast path (latin1) must never change what a frame says: whatever the bytes, a frame is
  // refused as not UTF-8 exactly when it is not, and otherwise reads as its UTF-8 decoding parses.
  const fuzz = new Fuzzer(18);
  const base = Buffer.from(telemetryFrame(syntheticLayerStats('r', 10, 'blocks.0.q', 'fprop', 1), 1));
  const inserts = [Buffer.from('é'), Buffer.from('✓'), Buffer.from('𝄞'), Buffer.from([0xff]), Buffer.from([0xc3]), Buffer.from([0x80]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xf4, 0x90, 0x80, 0x80])];
  const name = base.indexOf('blocks.0.q');
  let refused = 0;
  let read = 0;
  for (let i = 0; i < 3000; i++) {
    let bytes = base;
    for (let edits = 1 + fuzz.int(3); edits > 0; edits--) {
      // Mostly inside the layer name, where an edit can leave a valid record; anywhere otherwise.
      const at = fuzz.chance(0.8) ? name + fuzz.int(10) : fuzz.int(bytes.length);
      bytes = fuzz.chance(0.5) ? Buffer.concat([bytes.subarray(0, at), fuzz.pick(inserts), bytes.subarray(at)]) : Buffer.concat([bytes.subarray(0, at), Buffer.from([fuzz.int(256)]), bytes.subarray(at + 1)]);
    }
    const frame = readFrame(bytes, false, serverMessageSchema, SERVER_MESSAGE_TYPES, MAX_FRAME_BYTES);
    if (!isUtf8(bytes)) {
      assert.deepEqual(frame, { kind: 'error', code: 'bad-json', message: 'frame is not valid UTF-8 (protocol v1 frames are UTF-8 JSON text); dropped' }, bytes.toString('hex'));
      refused++;
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch {
      assert.equal(frame.kind === 'error' && frame.code, 'bad-json', bytes.toString('utf8'));
      continue;
    }
    if (frame.kind === 'message') {
      assert.deepEqual(frame.message, parsed);
      read++;
    } else assert.notEqual(frame.kind === 'error' && frame.code, 'bad-json', bytes.toString('utf8'));
  }
  assert.ok(refused > 300 && read > 300, `${refused} refused as not UTF-8, ${read} read: both must be exercised`);
});

test('a token-protected server refuses clients without the right token, accepts query and bearer tokens', async () => {
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch, token: 'sesame' });
  try {
    await assert.rejects(rawPeer(server.url), /401/);
    await assert.rejects(rawPeer(`${server.url}/?token=wrong`), /401/);
    const byQuery = await rawPeer(`${server.url}/?token=sesame`);
    await until(() => framesOfType(byQuery, 'hello').length === 1, 'hello with query token');
    byQuery.socket.close();
    let refusal = '';
    const wrong = new TrainerClient({ url: server.url, token: 'nope', onTelemetry: () => {}, onState: (state, why) => state === 'closed' && (refusal = why ?? '') });
    await until(() => wrong.state === 'closed', 'token refusal');
    assert.match(refusal, /refused the token \(HTTP 401\)/);
    const right = new TrainerClient({ url: server.url, token: 'sesame', onTelemetry: () => {} });
    await until(() => right.state === 'connected', 'bearer token accepted');
    right.close();
  } finally {
    await server.close();
  }
});

test('binding off loopback without a token is refused', async () => {
  await assert.rejects(startTrainerServer({ host: '0.0.0.0', baseConfig, launch: fakeLauncher().launch }), /not loopback\) needs a token/);
  assert.equal(isLoopbackHost('127.0.0.1'), true);
  assert.equal(isLoopbackHost('[::1]'), true);
  assert.equal(isLoopbackHost('192.168.1.5'), false);
});

test('listening line round trip; other lines are not mistaken for it', () => {
  const line = formatListeningLine({ url: 'ws://127.0.0.1:41234', token: 't0k' });
  assert.match(line, new RegExp(`^MXSCOPE_LISTENING \\{"url":"ws://127\\.0\\.0\\.1:41234","token":"t0k","protocol":"${PROTOCOL_VERSION.major}\\.${PROTOCOL_VERSION.minor}"\\}$`));
  assert.deepEqual(parseListeningLine(line), { url: 'ws://127.0.0.1:41234', token: 't0k' });
  assert.deepEqual(parseListeningLine(formatListeningLine({ url: 'ws://[::1]:1' })), { url: 'ws://[::1]:1' });
  assert.equal(parseListeningLine('step 3 loss 4.2'), undefined);
  assert.equal(parseListeningLine('MXSCOPE_LISTENING {"url":"http://x"}'), undefined);
  assert.equal(parseListeningLine('MXSCOPE_LISTENING {oops'), undefined);
});

test('the client ignores unknown server message types and drops malformed frames with a logged warning, and still connects', async () => {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  wss.on('connection', (socket) => {
    socket.send(JSON.stringify({ type: 'telepathy', seq: 0 }));
    socket.send('{"type":"hello",');
    socket.send(JSON.stringify({ type: 'step', seq: 1, runId: 'r', step: 'three' }));
    socket.send(JSON.stringify({ type: 'hello', seq: 0, protocol: { major: 1, minor: 9 }, trainer: { name: 'newer', version: '9' }, sessionId: 's', capabilities: ['mindReading'], lastSeq: 0 }));
  });
  await new Promise((resolve) => wss.once('listening', resolve));
  const logs: string[] = [];
  const client = new TrainerClient({ url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`, onTelemetry: () => assert.fail('no valid telemetry was sent'), log: (line) => logs.push(line) });
  try {
    await until(() => client.state === 'connected', 'connect to a newer minor version');
    assert.ok(logs.some((line) => line.includes('unknown type "telepathy"')), logs.join('\n'));
    assert.ok(logs.some((line) => line.includes('not valid JSON')), logs.join('\n'));
    assert.ok(logs.some((line) => line.includes('.step: expected an integer')), logs.join('\n'));
  } finally {
    client.close();
    wss.close();
  }
});

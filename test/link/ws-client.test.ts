// The host's websocket client (src/link/ws-client.ts) against the `ws` package's server, against a
// raw TCP server that writes crafted bytes (split anywhere, or breaking RFC 6455), and over TLS.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { acceptFor, WsClient } from '../../src/link/ws-client.js';
import { until } from './helpers.js';

/** What a test opened, closed after it whether it passed or not (a failing test must not hang the run). */
const opened: { close(): void }[] = [];
afterEach(() => {
  for (const thing of opened.splice(0)) thing.close();
});

type Event = [kind: string, value: string | number, isBinary?: boolean];

interface Collected {
  client: WsClient;
  events: Event[];
  messages: () => string[];
  closed: { code: number; reason: string } | undefined;
}

function collect(url: string, maxPayload = 1 << 20, headers?: Record<string, string>): Collected {
  const collected: Collected = {
    client: undefined as unknown as WsClient,
    events: [],
    messages: () => collected.events.filter(([kind]) => kind === 'message').map(([, value]) => value as string),
    closed: undefined,
  };
  collected.client = new WsClient(url, { maxPayload, headers }, {
    open: () => collected.events.push(['open', '']),
    message: (data, isBinary) => collected.events.push(['message', data.toString('utf8'), isBinary]),
    tooLarge: (bytes) => collected.events.push(['tooLarge', bytes]),
    refused: (status) => collected.events.push(['refused', status]),
    error: (error) => collected.events.push(['error', error.message]),
    close: (code, reason) => (collected.closed = { code, reason }),
  });
  opened.push({ close: () => collected.client.terminate() });
  return collected;
}

async function wsServer(): Promise<{ wss: WebSocketServer; url: string; peer: () => Promise<WebSocket> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => wss.once('listening', resolve));
  const peers: WebSocket[] = [];
  wss.on('connection', (socket) => peers.push(socket));
  opened.push({ close: () => wss.close() });
  const peer = async () => {
    await until(() => peers.length > 0, 'the client to connect');
    return peers[0]!;
  };
  return { wss, url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/path?q=1`, peer };
}

/** A server frame as bytes: unmasked unless `mask` is given; `fin`, `rsv` and the length's form settable. */
function frame(opcode: number, payload: Buffer | string, options: { fin?: boolean; rsv?: number; mask?: boolean; longForm?: 126 | 127 } = {}): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const n = body.length;
  const form = options.longForm ?? (n < 126 ? 0 : n < 65536 ? 126 : 127);
  const head = Buffer.alloc(2 + (form === 126 ? 2 : form === 127 ? 8 : 0) + (options.mask ? 4 : 0));
  head[0] = (options.fin === false ? 0 : 0x80) | ((options.rsv ?? 0) << 4) | opcode;
  head[1] = (options.mask ? 0x80 : 0) | (form === 0 ? n : form);
  if (form === 126) head.writeUInt16BE(n, 2);
  if (form === 127) head.writeBigUInt64BE(BigInt(n), 2);
  return Buffer.concat([head, body]); // a mask key of zeros leaves the payload as it is
}

function closeFrame(code: number, reason: Buffer | string = ''): Buffer {
  const payload = Buffer.concat([Buffer.alloc(2), typeof reason === 'string' ? Buffer.from(reason) : reason]);
  payload.writeUInt16BE(code, 0);
  return frame(0x8, payload);
}

function upgradeResponse(key: string, extra = ''): string {
  return `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n${extra}\r\n`;
}

/** A TCP server that reads one upgrade request and hands the socket, the request and its key to `serve`. */
async function rawServer(serve: (socket: Socket, key: string, request: string) => void | Promise<void>, allowHalfOpen = false): Promise<{ server: Server; url: string; received: Buffer[] }> {
  const received: Buffer[] = [];
  const server = createServer({ allowHalfOpen }, (socket) => {
    let head = '';
    let upgraded = false;
    socket.on('data', (data) => {
      if (upgraded) return void received.push(data);
      head += data.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      upgraded = true;
      if (end + 4 < head.length) received.push(Buffer.from(head.slice(end + 4), 'latin1'));
      const key = /sec-websocket-key: (\S+)/i.exec(head)![1]!;
      void serve(socket, key, head.slice(0, end));
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => server.close() });
  return { server, url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`, received };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('against the ws server: messages of every length form, whole and fragmented, binary flagged, in order', async () => {
  const { wss, url, peer } = await wsServer();
  const got = collect(url, 1 << 20);
  const server = await peer();
  await until(() => got.client.isOpen, 'open');
  const sizes = [0, 1, 125, 126, 65535, 65536, 300_000, 700_000];
  const texts = sizes.map((n, i) => String.fromCharCode(97 + i).repeat(n));
  for (const text of texts) server.send(text);
  server.send(Buffer.from([1, 2, 3]), { binary: true });
  // A fragmented text message ("part one, part two"), a ping between its fragments.
  server.send('part one, ', { fin: false });
  server.ping('are you there');
  server.send('part two', { fin: true });
  server.send('é ü 😀');
  await until(() => got.events.length >= 1 + texts.length + 3, 'every message');
  assert.deepEqual(got.events[0], ['open', '']);
  assert.deepEqual(got.messages(), [...texts, '\u0001\u0002\u0003', 'part one, part two', 'é ü 😀']);
  assert.equal(got.events.find(([kind, value]) => kind === 'message' && value === '\u0001\u0002\u0003')![2], true);
  assert.equal(got.events.find(([kind, value]) => kind === 'message' && value === 'a'.repeat(0))![2], false);
  got.client.close(1000, 'bye');
  wss.close();
});

test('against the ws server: what the client sends arrives masked and whole; pings get pongs; a close is echoed', async () => {
  const { wss, url, peer } = await wsServer();
  const got = collect(url);
  const server = await peer();
  await until(() => got.client.isOpen, 'open');
  const received: string[] = [];
  server.on('message', (data) => received.push(data.toString()));
  const pongs: string[] = [];
  server.on('pong', (data) => pongs.push(data.toString()));
  const long = 'x'.repeat(70_000); // a 64-bit length
  for (const text of ['hello', 'y'.repeat(200), long, 'ü']) got.client.send(text);
  server.ping('ping-payload');
  await until(() => received.length === 4 && pongs.length === 1, 'the messages and the pong');
  assert.deepEqual(received, ['hello', 'y'.repeat(200), long, 'ü']);
  assert.deepEqual(pongs, ['ping-payload']);
  const serverClosed = new Promise<[number, string]>((resolve) => server.on('close', (code, reason) => resolve([code, reason.toString()])));
  server.close(4001, 'trainer says bye');
  await until(() => got.closed !== undefined, 'the close');
  assert.deepEqual(got.closed, { code: 4001, reason: 'trainer says bye' });
  assert.deepEqual(await serverClosed, [4001, '']);
  assert.throws(() => got.client.send('late'), /not open \(closed\): nothing was sent/);
  wss.close();
});

test('the client closing: the server sees its code and reason; before the upgrade it drops the connection', async () => {
  const { wss, url, peer } = await wsServer();
  const got = collect(url);
  const server = await peer();
  await until(() => got.client.isOpen, 'open');
  const serverClosed = new Promise<[number, string]>((resolve) => server.on('close', (code, reason) => resolve([code, reason.toString()])));
  got.client.close(1000, 'client disconnecting');
  assert.deepEqual(await serverClosed, [1000, 'client disconnecting']);
  await until(() => got.closed !== undefined, 'the close');
  assert.equal(got.closed!.code, 1000);
  const early = collect(url);
  assert.throws(() => early.client.send('too soon'), /not open \(connecting\)/);
  early.client.close();
  await until(() => early.closed !== undefined, 'the early close');
  assert.equal(early.closed!.code, 1006);
  assert.equal(early.events.some(([kind]) => kind === 'open'), false);
  wss.close();
});

test('bytes split anywhere (headers, lengths, payloads, fragments, control frames) read as the same messages', async () => {
  const stream = Buffer.concat([
    frame(0x1, 'first'),
    frame(0x1, 'z'.repeat(300)),
    frame(0x1, 'frag-a ', { fin: false }),
    frame(0x9, 'p'),
    frame(0x0, 'frag-b ', { fin: false }),
    frame(0x0, 'frag-c', { fin: true }),
    frame(0x1, 'q'.repeat(70_000)),
    frame(0x1, ''),
    frame(0x2, Buffer.from([0, 255])),
    frame(0x1, 'last'),
  ]);
  const expected = ['first', 'z'.repeat(300), 'frag-a frag-b frag-c', 'q'.repeat(70_000), '', '\u0000\ufffd', 'last'];
  // Cut points: every byte of the first 40 (headers split inside their length fields), then chunks
  // of 1 to 13 bytes, then the long frame in two, each write on its own read (a pause between).
  const cuts: number[] = [];
  for (let at = 1; at < 40; at++) cuts.push(at);
  for (let at = 40, step = 1; at < 420; at += step, step = (step % 13) + 1) cuts.push(at);
  cuts.push(30_000, stream.length - 20, stream.length - 3);
  const { server, url, received } = await rawServer(async (socket, key) => {
    socket.setNoDelay(true);
    socket.write(upgradeResponse(key));
    let from = 0;
    for (const cut of [...cuts, stream.length]) {
      socket.write(stream.subarray(from, cut));
      from = cut;
      await pause(1);
    }
  });
  const got = collect(url);
  await until(() => got.messages().length === expected.length, 'every message', 20_000);
  assert.deepEqual(got.messages(), expected);
  // The ping got its pong: a masked client frame of opcode 0xA carrying "p".
  await until(() => Buffer.concat(received).length >= 7, 'the pong');
  const pong = Buffer.concat(received);
  assert.equal(pong[0], 0x8a);
  assert.equal(pong[1], 0x80 | 1);
  assert.equal(String.fromCharCode(pong[6]! ^ pong[2]!), 'p');
  got.client.terminate();
  server.close();
});

test('the upgrade response and the first frames in one read; an upgrade response split byte by byte', async () => {
  const together = await rawServer((socket, key) => void socket.write(Buffer.concat([Buffer.from(upgradeResponse(key)), frame(0x1, 'hello'), frame(0x1, 'world')])));
  const a = collect(together.url);
  await until(() => a.messages().length === 2, 'both messages');
  assert.deepEqual(a.events.map(([kind]) => kind), ['open', 'message', 'message']);
  a.client.terminate();
  together.server.close();
  const split = await rawServer(async (socket, key) => {
    socket.setNoDelay(true);
    const bytes = Buffer.concat([Buffer.from(upgradeResponse(key)), frame(0x1, 'after')]);
    for (let i = 0; i < bytes.length; i++) {
      socket.write(bytes.subarray(i, i + 1));
      await pause(1);
    }
  });
  const b = collect(split.url);
  await until(() => b.messages().length === 1, 'the message', 20_000);
  assert.deepEqual(b.messages(), ['after']);
  // The head's end and the first frames in one read, its start in the read before.
  const straddling = await rawServer(async (socket, key) => {
    socket.setNoDelay(true);
    const bytes = Buffer.concat([Buffer.from(upgradeResponse(key)), frame(0x1, 'one'), frame(0x1, 'two')]);
    socket.write(bytes.subarray(0, 40));
    await pause(20);
    socket.write(bytes.subarray(40));
  });
  const c = collect(straddling.url);
  await until(() => c.messages().length === 2, 'both messages');
  assert.deepEqual(c.messages(), ['one', 'two']);
});

test('the upgrade request carries the path, query and headers, and no Origin', async () => {
  let request = '';
  const { server, url } = await rawServer((socket, key, head) => {
    request = head;
    socket.write(upgradeResponse(key));
  });
  const got = collect(`${url}some/path?token=abc`, 1 << 20, { Authorization: 'Bearer sesame' });
  await until(() => got.client.isOpen, 'open');
  assert.match(request, /^GET \/some\/path\?token=abc HTTP\/1\.1\r\n/);
  assert.match(request, /\r\nAuthorization: Bearer sesame(\r\n|$)/);
  assert.match(request, /\r\nSec-WebSocket-Version: 13(\r\n|$)/);
  assert.doesNotMatch(request, /origin/i);
  got.client.terminate();
  server.close();
});

for (const [name, respond, expected] of [
  ['a 401', () => 'HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n', ['refused', 401]],
  ['a wrong accept', () => 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: bm90IGl0\r\n\r\n', ['error', /does not answer this client's key/]],
  ['no Upgrade header', (key: string) => upgradeResponse(key).replace('Upgrade: websocket\r\n', ''), ['error', /no "Upgrade: websocket"/]],
  ['an extension not offered', (key: string) => upgradeResponse(key, 'Sec-WebSocket-Extensions: permessage-deflate\r\n'), ['error', /an extension this client did not offer/]],
  ['not HTTP', () => 'SSH-2.0-OpenSSH_9.2\r\n\r\n', ['error', /not a websocket server: it answered "SSH-2\.0-OpenSSH_9\.2"/]],
  ['a head over 16 KiB', () => `HTTP/1.1 101 Switching Protocols\r\nX-Filler: ${'f'.repeat(20_000)}`, ['error', /head is over 16384 bytes/]],
] as const) {
  test(`an upgrade answered with ${name} is refused, named, and the connection dropped`, async () => {
    const { server, url } = await rawServer((socket, key) => void socket.write(respond(key)));
    const got = collect(url);
    await until(() => got.closed !== undefined, 'the close');
    const [kind, value] = expected;
    const event = got.events.find(([k]) => k === kind);
    assert.ok(event, `a ${kind} event among ${JSON.stringify(got.events)}`);
    if (typeof value === 'number') assert.equal(event[1], value);
    else assert.match(String(event[1]), value);
    assert.equal(got.events.some(([k]) => k === 'open'), false);
    assert.equal(got.closed!.code, 1006);
    server.close();
  });
}

for (const [name, bytes, code, why] of [
  ['a masked frame', frame(0x1, 'hi', { mask: true }), 1002, /must not be masked/],
  ['RSV bits', frame(0x1, 'hi', { rsv: 4 }), 1002, /RSV bits set/],
  ['a reserved opcode', frame(0x3, 'hi'), 1002, /reserved opcode 0x3/],
  ['a fragmented ping', frame(0x9, 'hi', { fin: false }), 1002, /fragmented control frame/],
  ['a 126-byte ping', frame(0x9, 'p'.repeat(126)), 1002, /control frame of 126 bytes/],
  ['a continuation with no message', frame(0x0, 'hi'), 1002, /continuation frame with no message/],
  ['a new message inside a fragmented one', Buffer.concat([frame(0x1, 'a', { fin: false }), frame(0x1, 'b')]), 1002, /before the fragmented one was finished/],
  ['a length not in its minimal form', frame(0x1, 'short', { longForm: 126 }), 1002, /minimal encoding/],
  ['a 64-bit length not in its minimal form', frame(0x1, 'short', { longForm: 127 }), 1002, /minimal encoding/],
  ['an invalid close code', closeFrame(1005), 1002, /invalid close code 1005/],
  ['a close reason that is not UTF-8', closeFrame(1000, Buffer.from([0xff, 0xfe])), 1007, /close reason is not valid UTF-8/],
] as const) {
  test(`a server frame with ${name} fails the connection with ${code}, named, after the messages before it`, async () => {
    const { server, url, received } = await rawServer((socket, key) => void socket.write(Buffer.concat([Buffer.from(upgradeResponse(key)), frame(0x1, 'before'), bytes])));
    const got = collect(url);
    await until(() => got.closed !== undefined, 'the close');
    assert.deepEqual(got.messages(), ['before']);
    const error = got.events.find(([kind]) => kind === 'error');
    assert.ok(error, JSON.stringify(got.events));
    assert.match(String(error[1]), /^the server broke the websocket protocol: /);
    assert.match(String(error[1]), why);
    assert.equal(got.closed!.code, code);
    // The client said why in a close frame of its own (masked: opcode 0x8, code in the first two bytes).
    const sent = Buffer.concat(received);
    assert.equal(sent[0], 0x88);
    assert.equal(((sent[6]! ^ sent[2]!) << 8) | (sent[7]! ^ sent[3]!), code);
    server.close();
  });
}

test('a message over maxPayload is skipped as it arrives and reported; the connection lives and the next one arrives', async () => {
  const { server, url } = await rawServer(async (socket, key) => {
    socket.write(upgradeResponse(key));
    socket.write(frame(0x1, 'w'.repeat(5000)));
    // Fragments that add up past the limit, a ping between them, and the next message.
    socket.write(Buffer.concat([frame(0x1, 'v'.repeat(600), { fin: false }), frame(0x9, 'still there?'), frame(0x0, 'v'.repeat(600))]));
    await pause(5);
    socket.write(frame(0x1, 'small'));
  });
  const got = collect(url, 1000);
  await until(() => got.messages().length === 1, 'the small message');
  assert.deepEqual(got.events.slice(1), [['tooLarge', 5000], ['tooLarge', 1200], ['message', 'small', false]]);
  assert.equal(got.closed, undefined);
  got.client.terminate();
  server.close();
});

test('a message handler that throws closes the connection with 1011 and says so; nothing after it is read', async () => {
  const { url, received } = await rawServer(async (socket, key) => {
    socket.write(Buffer.concat([Buffer.from(upgradeResponse(key)), frame(0x1, 'fine'), frame(0x1, 'boom'), frame(0x1, 'same read')]));
    // Half open: the client's FIN does not end this side, so it can still write what the client must not read.
    await pause(50);
    socket.end(frame(0x1, 'next read'));
  }, true);
  const events: string[] = [];
  let closed: number | undefined;
  const client = new WsClient(url, { maxPayload: 1 << 20 }, {
    open: () => {},
    message: (data) => {
      events.push(data.toString());
      if (data.toString() === 'boom') throw new Error('store refused it');
    },
    tooLarge: () => {},
    refused: () => {},
    error: (error) => events.push(error.message),
    close: (code) => (closed = code),
  });
  opened.push({ close: () => client.terminate() });
  await until(() => closed !== undefined, 'the close');
  assert.deepEqual(events, ['fine', 'boom', 'a message handler threw (store refused it); the connection closes, the rest of this read is lost']);
  assert.equal(closed, 1011);
  const sent = Buffer.concat(received);
  assert.equal(sent[0], 0x88);
  assert.equal(((sent[6]! ^ sent[2]!) << 8) | (sent[7]! ^ sent[3]!), 1011);
});

test('a refused connection reports the socket error and a 1006 close', async () => {
  const { server, url } = await rawServer(() => {});
  await new Promise((resolve) => server.close(resolve));
  const got = collect(url);
  await until(() => got.closed !== undefined, 'the close');
  assert.match(String(got.events.find(([kind]) => kind === 'error')?.[1]), /ECONNREFUSED 127\.0\.0\.1/);
  assert.deepEqual(got.closed, { code: 1006, reason: '' });
});

test('a server that accepts the connection and never answers the upgrade is dropped after the handshake timeout, named', async () => {
  const { server, url } = await rawServer(() => {});
  const got = { events: [] as string[], closed: undefined as number | undefined };
  const started = Date.now();
  const client = new WsClient(url, { maxPayload: 1000, handshakeTimeoutMs: 300 }, {
    open: () => got.events.push('open'),
    message: () => got.events.push('message'),
    tooLarge: () => got.events.push('tooLarge'),
    refused: () => got.events.push('refused'),
    error: (error) => got.events.push(error.message),
    close: (code) => (got.closed = code),
  });
  opened.push({ close: () => client.terminate() });
  await until(() => got.closed !== undefined, 'the close');
  assert.ok(Date.now() - started >= 290, 'not before the timeout');
  assert.deepEqual(got.events, [`no websocket upgrade from ${new URL(url).host} within 300 ms`]);
  assert.equal(got.closed, 1006);
  server.close();
  // An upgrade that was answered is not dropped when the timeout would have passed.
  const { url: wsUrl, peer } = await wsServer();
  const answered = new WsClient(wsUrl, { maxPayload: 1000, handshakeTimeoutMs: 300 }, {
    open: () => {},
    message: (data) => got.events.push(`later: ${data.toString()}`),
    tooLarge: () => {},
    refused: () => {},
    error: (error) => got.events.push(error.message),
    close: () => got.events.push('closed'),
  });
  opened.push({ close: () => answered.terminate() });
  const serverSide = await peer();
  await pause(500);
  serverSide.send('still open');
  await until(() => got.events.includes('later: still open'), 'the message after the timeout');
  assert.equal(answered.isOpen, true);
  assert.equal(got.events.includes('closed'), false);
});

test('wss:// reads through TLS the same way (a self-signed test certificate)', async () => {
  const fixtures = join(__dirname, '..', 'fixtures', 'tls');
  const wss = new WebSocketServer({ noServer: true });
  const httpsServer = createHttpsServer({ key: readFileSync(join(fixtures, 'localhost.key')), cert: readFileSync(join(fixtures, 'localhost.crt')) });
  httpsServer.on('upgrade', (request, socket, head) => wss.handleUpgrade(request, socket, head, (ws) => {
    ws.send('over tls');
    ws.send('t'.repeat(100_000));
    ws.on('message', (data) => ws.send(`echo ${data.toString()}`));
  }));
  await new Promise<void>((resolve) => httpsServer.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => httpsServer.close() });
  const before = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0'; // this file's process only: the certificate is self-signed
  try {
    const got = collect(`wss://127.0.0.1:${(httpsServer.address() as AddressInfo).port}/`);
    await until(() => got.messages().length === 2, 'the messages over TLS');
    got.client.send('ping over tls');
    await until(() => got.messages().length === 3, 'the echo');
    assert.deepEqual(got.messages(), ['over tls', 't'.repeat(100_000), 'echo ping over tls']);
    got.client.close();
    await until(() => got.closed !== undefined, 'the close');
    assert.equal(got.closed!.code, 1000);
  } finally {
    if (before === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = before;
    wss.close();
    httpsServer.close();
  }
});

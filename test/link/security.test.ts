// Issue 11 as an attacker would try it: hostile config keys, browsers, tokens, and checkpoint paths.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTrainerServer } from '../../src/link/trainer-server.js';
import { TrainerClient } from '../../src/link/trainer-client.js';
import { serveToken } from '../../src/cli/serve.js';
import { splitTokenUrl, urlWithToken } from '../../src/link/auth.js';
import { parseListeningLine, formatListeningLine } from '../../src/link/listening-line.js';
import { checkCheckpointPath } from '../../src/link/checkpoint-path.js';
import { baseConfig, fakeLauncher } from './fake-run.js';
import { framesOfType, rawPeer, until } from './helpers.js';

const INHERITED = ['__proto__', 'valueOf', 'hasOwnProperty', 'toString', 'constructor', 'toLocaleString', 'isPrototypeOf'];

test('config keys every object inherits are refused as unknown fields, and a running run survives them', async () => {
  const server = await startTrainerServer({ baseConfig: { ...baseConfig, steps: 60 }, launch: fakeLauncher(2).launch });
  const peer = await rawPeer(server.url);
  try {
    peer.socket.send(JSON.stringify({ type: 'subscribe', id: 's', from: 1 }));
    peer.socket.send(JSON.stringify({ type: 'startRun', id: 'go' }));
    await until(() => framesOfType(peer, 'step').length > 2, 'the run streams');
    for (const key of INHERITED) {
      peer.socket.send(`{"type":"setNextRunConfig","id":"top-${key}","change":{"${key}":1}}`);
      peer.socket.send(`{"type":"setNextRunConfig","id":"gemm-${key}","change":{"gemms":{"wgrad":{"${key}":1}}}}`);
    }
    await until(() => framesOfType(peer, 'error').length === 2 * INHERITED.length, 'an error per hostile change');
    for (const key of INHERITED) {
      const top = framesOfType(peer, 'error').find((e) => e.id === `top-${key}`)!;
      assert.equal(top.code, 'invalid-message');
      assert.match(String(top.message), new RegExp(`^\\.change\\.${key}: expected no such field: a next-run config has gemms, seed`));
      const gemm = framesOfType(peer, 'error').find((e) => e.id === `gemm-${key}`)!;
      assert.match(String(gemm.message), new RegExp(`^\\.change\\.gemms\\.wgrad\\.${key}: expected no such field`));
    }
    assert.deepEqual(server.nextRunConfig, { ...baseConfig, steps: 60 }, 'nothing changed');
    await until(() => framesOfType(peer, 'runEnded').length === 1, 'the run ends normally', 10_000);
    assert.equal(framesOfType(peer, 'runEnded')[0]!.status, 'completed');
    assert.equal(peer.closed, undefined);
  } finally {
    peer.socket.close();
    await server.close();
  }
});

test('browsers are refused with 403 unless their origin is allow-listed; tools send no Origin', async () => {
  const logs: string[] = [];
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch, token: 'sesame', allowOrigins: ['https://allowed.example'], log: (line) => logs.push(line) });
  try {
    await assert.rejects(rawPeer(`${server.url}/?token=sesame`, { origin: 'null' }), /403/, 'a file:// page sends Origin: null');
    await assert.rejects(rawPeer(`${server.url}/?token=sesame`, { origin: 'http://evil.example' }), /403/);
    assert.ok(logs.some((line) => line.includes('origin "http://evil.example" is not allowed')), logs.join('\n'));
    const allowed = await rawPeer(`${server.url}/?token=sesame`, { origin: 'https://allowed.example' });
    await until(() => framesOfType(allowed, 'hello').length === 1, 'allow-listed origin');
    allowed.socket.close();
    const client = new TrainerClient({ url: server.url, token: 'sesame', onTelemetry: () => {} });
    await until(() => client.state === 'connected', 'the extension client (no Origin)');
    client.close();
  } finally {
    await server.close();
  }
});

test('the bearer scheme name is case-insensitive; a pasted URL with ?token= connects with the token as a header', async () => {
  let seenUrl = '';
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch, token: 'sesame', log: () => {} });
  try {
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const peer = await rawPeer(server.url, { headers: { Authorization: `${scheme} sesame` } });
      await until(() => framesOfType(peer, 'hello').length === 1, `${scheme} accepted`);
      peer.socket.close();
    }
    await assert.rejects(rawPeer(server.url, { headers: { Authorization: 'Basic sesame' } }), /401/);
    const pasted = urlWithToken(server.url, 'sesame');
    assert.match(pasted, /\/\?token=sesame$/);
    const client = new TrainerClient({ url: pasted, onTelemetry: () => {}, log: (line) => (seenUrl += line) });
    await until(() => client.state === 'connected', 'connect with the pasted URL');
    client.close();
    assert.ok(!seenUrl.includes('sesame'), 'the token never shows in the client log');
  } finally {
    await server.close();
  }
  assert.deepEqual(splitTokenUrl('ws://127.0.0.1:41234/?token=a%2Fb'), { url: 'ws://127.0.0.1:41234', token: 'a/b' });
  assert.deepEqual(splitTokenUrl('ws://h:1'), { url: 'ws://h:1' });
  assert.deepEqual(parseListeningLine(formatListeningLine({ url: urlWithToken('ws://127.0.0.1:5', 'tk'), token: 'tk' })), { url: 'ws://127.0.0.1:5', token: 'tk' });
});

test('--serve requires a token by default: generated when none is given; --no-token only on loopback', () => {
  const generated = serveToken({ host: '127.0.0.1' }, {});
  assert.ok(generated && generated.length >= 32, 'a random token on loopback too');
  assert.notEqual(serveToken({ host: '127.0.0.1' }, {}), generated);
  assert.equal(serveToken({ host: '127.0.0.1' }, { MXSCOPE_TOKEN: 'from-env' }), 'from-env');
  assert.equal(serveToken({ host: '127.0.0.1', token: 'flag' }, { MXSCOPE_TOKEN: 'from-env' }), 'flag');
  assert.equal(serveToken({ host: '127.0.0.1', noToken: true }, {}), undefined);
  assert.throws(() => serveToken({ host: '0.0.0.0', noToken: true }, {}), /--no-token is refused when binding to 0\.0\.0\.0/);
});

test('startRun.fromCheckpoint opens only .safetensors files under the server\'s run directories; refusals name the rule and leak nothing', async () => {
  const root = mkdtempSync(join(tmpdir(), 'mxscope-ckpt-'));
  const runs = join(root, 'runs');
  const outside = join(root, 'elsewhere');
  mkdirSync(join(runs, 'run-1', 'checkpoints'), { recursive: true });
  mkdirSync(outside);
  const good = join(runs, 'run-1', 'checkpoints', 'step-00000009.safetensors');
  writeFileSync(good, 'x');
  writeFileSync(join(outside, 'secret.safetensors'), 'TOP SECRET CONTENT');
  symlinkSync(join(outside, 'secret.safetensors'), join(runs, 'run-1', 'checkpoints', 'link.safetensors'));
  const fake = fakeLauncher();
  const launched: (string | undefined)[] = [];
  const server = await startTrainerServer({
    baseConfig: { ...baseConfig, steps: 1 },
    checkpointDirs: [runs],
    launch: (options) => {
      launched.push(options.fromCheckpoint);
      return fake.launch(options);
    },
  });
  const peer = await rawPeer(server.url);
  try {
    const attempts: [string, RegExp][] = [
      ['/etc/passwd', /only \.safetensors files can be resumed from/],
      [join(outside, 'secret.safetensors'), /outside the run directories this trainer writes/],
      [`${runs}/../elsewhere/secret.safetensors`, /outside the run directories/],
      [join(runs, 'run-1', 'checkpoints', 'link.safetensors'), /after resolving symbolic links/],
      [join(runs, 'missing.safetensors'), /no such checkpoint/],
      ['relative/step.safetensors', /must be absolute/],
    ];
    for (const [i, [path]] of attempts.entries()) peer.socket.send(JSON.stringify({ type: 'startRun', id: `a${i}`, fromCheckpoint: path }));
    await until(() => framesOfType(peer, 'error').length === attempts.length, 'every probe refused');
    for (const [i, [, why]] of attempts.entries()) {
      const error = framesOfType(peer, 'error').find((e) => e.id === `a${i}`)!;
      assert.equal(error.code, 'invalid-message');
      assert.match(String(error.message), why);
      assert.doesNotMatch(String(error.message), /SECRET|root:|bytes/);
    }
    assert.deepEqual(launched, [], 'no refused path reached the launcher');
    peer.socket.send(JSON.stringify({ type: 'startRun', id: 'ok', fromCheckpoint: good }));
    await until(() => framesOfType(peer, 'ack').some((a) => a.id === 'ok'), 'an allowed checkpoint starts');
    assert.deepEqual(launched, [good]);
  } finally {
    peer.socket.close();
    await server.close();
    rmSync(root, { recursive: true, force: true });
  }
  assert.match((await checkCheckpointPath('/tmp/x.safetensors', []))!, /outside the run directories/, 'no directories: nothing may be resumed');
});

test('a deeply nested frame is refused before parsing and the connection lives', async () => {
  const server = await startTrainerServer({ baseConfig, launch: fakeLauncher().launch });
  const peer = await rawPeer(server.url);
  try {
    const started = performance.now();
    peer.socket.send('['.repeat(3 * 1024 * 1024));
    peer.socket.send(JSON.stringify({ type: 'stopRun', id: 'after' }));
    await until(() => framesOfType(peer, 'error').length === 2, 'both answered');
    const [deep, after] = framesOfType(peer, 'error');
    assert.equal(deep!.code, 'bad-json');
    assert.match(String(deep!.message), /deeper than 64 levels/);
    assert.equal(after!.code, 'no-active-run');
    assert.ok(performance.now() - started < 1000, `took ${performance.now() - started} ms`);
  } finally {
    peer.socket.close();
    await server.close();
  }
});

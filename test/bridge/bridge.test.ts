// The Python bridge (python/mxscope_bridge) seen from the extension's side: the host's TrainerClient
// connects to a real bridge process, steers the next run and receives its telemetry; a raw peer
// checks every frame against serverMessageSchema.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { TrainerClient, type ConnectionState } from '../../src/link/trainer-client.js';
import { parseListeningLine, type ListeningInfo } from '../../src/link/listening-line.js';
import { check } from '../../src/protocol/validate.js';
import { serverMessageSchema, type LayerStatsRecord, type RunConfig, type RunStartedRecord, type ServerTelemetry } from '../../src/protocol/index.js';
import { rawPeer, until } from '../link/helpers.js';
import { python } from './python.js';

const FIXTURE = join(__dirname, '..', '..', 'python', 'tests', 'serve_fixture.py');
const LINEARS = ['blocks.0.up', 'blocks.0.down', 'blocks.1.up', 'blocks.1.down', 'lm_head'];

async function startBridge(token: string): Promise<{ child: ChildProcess; info: ListeningInfo; printed: string[]; stderr: string[] }> {
  const child = spawn(python(), [FIXTURE, '--token', token, '--out', mkdtempSync(join(tmpdir(), 'mxscope-bridge-'))], { stdio: ['pipe', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  const printed: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const lines = createInterface({ input: child.stdout! });
  const info = await new Promise<ListeningInfo>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bridge printed no listening line in 60 s; stderr: ${stderr.join('')}`)), 60_000);
    lines.on('line', (line) => {
      const parsed = parseListeningLine(line);
      if (parsed) {
        printed.push(line);
        clearTimeout(timer);
        resolve(parsed);
      }
    });
    child.once('exit', (code) => reject(new Error(`bridge exited (${code}) before listening; stderr: ${stderr.join('')}`)));
  });
  return { child, info, printed, stderr };
}

test('the Python bridge speaks protocol v1 to the host client: token, next-run config, startRun, telemetry', { timeout: 120_000 }, async () => {
  const token = 'bridge-test-token';
  const { child, info, printed, stderr } = await startBridge(token);
  const states: [ConnectionState, string | undefined][] = [];
  const bareUrl = info.url; // parseListeningLine moves the URL's ?token= into info.token
  const refused = new TrainerClient({ url: bareUrl, onTelemetry: () => {}, onState: (state, detail) => states.push([state, detail]), backoff: { initialMs: 10, maxMs: 50 } });
  const records: ServerTelemetry[] = [];
  const configs: RunConfig[] = [];
  const logs: string[] = [];
  const client = new TrainerClient({ url: `${bareUrl}/?token=${token}`, onTelemetry: (r) => records.push(r), onNextRunConfig: (c) => configs.push(c), log: (line) => logs.push(line) });
  // A failed connect must still end the bridge, or its open stdin keeps this test process alive.
  const raw = await rawPeer(`${bareUrl}/?token=${token}`).catch((error: unknown) => {
    refused.close();
    client.close();
    child.kill();
    throw error;
  });
  try {
    assert.equal(info.token, token, 'the listening line names the token');
    assert.match(printed.join(''), new RegExp(`"url":"${bareUrl}/\\?token=${token}"`), 'the printed URL carries the token, ready to paste');
    await until(() => refused.state === 'closed', 'refusal without a token', 10_000);
    assert.match(states.at(-1)![1] ?? '', /refused the token \(HTTP 401\)/);

    await until(() => client.state === 'connected' && configs.length > 0, 'connect + subscribe', 10_000);
    assert.equal(client.hello?.trainer.name, 'mxscope-bridge');
    raw.socket.send(JSON.stringify({ type: 'subscribe', id: 'raw', from: 1 }));

    const mx = { precision: 'mxfp4', rotation: 'hadamard', hadamardBlock: 16 } as const;
    await client.request({ type: 'setNextRunConfig', change: { gemms: { fprop: mx, dgrad: mx, wgrad: mx }, steps: 11, statsEvery: 5 } });
    await until(() => configs.at(-1)?.gemms.wgrad.rotation === 'hadamard', 'nextRunConfig broadcast');
    await assert.rejects(client.request({ type: 'setNextRunConfig', change: { gemms: { wgrad: { rotation: 'diagonal' } } } } as never), /\[invalid-message\]/);
    const started = await client.request({ type: 'startRun' });
    assert.match(started.detail ?? '', /^\d{8}-\d{6}-[0-9a-f]{6}$/);
    await until(() => records.some((r) => r.type === 'runEnded'), 'the run to end', 60_000);
    await assert.rejects(client.request({ type: 'stopRun' }), /\[no-active-run\]/);

    records.forEach((record, i) => assert.equal(record.seq, i + 1, 'consecutive seqs'));
    const runStarted = records[0] as RunStartedRecord & ServerTelemetry;
    assert.equal(runStarted.type, 'runStarted');
    assert.equal(runStarted.runId, started.detail);
    assert.deepEqual({ ...runStarted.config.gemms.wgrad }, { ...mx, rounding: 'nearest-even', srPrescale: false }, 'the run used the requested config');
    assert.deepEqual(runStarted.layers.map((l) => l.name), LINEARS);
    assert.deepEqual(records.filter((r) => r.type === 'step').map((r) => r.step), [...Array(11).keys()]);
    const stats = records.filter((r): r is LayerStatsRecord & ServerTelemetry => r.type === 'layerStats');
    assert.equal(stats.length, 3 * LINEARS.length * 3, 'three GEMMs of every linear at steps 0, 5, 10');
    for (const r of stats) {
      assert.equal(r.precision, 'mxfp4');
      for (const operand of r.operands) assert.equal(operand.blocks, operand.histogram.counts.reduce((a, b) => a + b, 0) + operand.histogram.nanBlocks);
    }
    const wgrad = stats.filter((r) => r.gemm === 'wgrad' && r.layer === 'lm_head');
    assert.deepEqual(wgrad.map((r) => r.step), [0, 5, 10]);
    assert.equal(wgrad[0]!.wgradError!.lag1Cos, null);
    for (const r of wgrad.slice(1)) assert.equal(typeof r.wgradError!.lag1Cos, 'number');
    assert.equal(records.at(-1)!.type, 'runEnded');
    assert.deepEqual(logs.filter((line) => /dropped a server frame|gap/.test(line)), []);

    await until(() => raw.frames.filter((f) => f.type === 'runEnded').length === 1, 'raw peer to see the run end');
    for (const frame of raw.frames) check(serverMessageSchema, frame, 'frame');
    assert.ok(raw.frames.length >= records.length + 2, 'the raw peer saw hello, ack and every record');
  } catch (error) {
    throw new Error(`${(error as Error).message}\nbridge stderr: ${stderr.join('')}`, { cause: error });
  } finally {
    refused.close();
    client.close();
    raw.socket.close();
    child.stdin!.end();
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
  }
});

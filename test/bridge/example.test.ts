// The worked example (python/examples/gpt_brown.py: a character GPT with tied weights, biases and
// an 82-symbol vocabulary, served with bridge.runs()) driven the way the extension's Switch Rotation
// + Start Next Run drive it: setNextRunConfig → startRun (sent the moment the previous runEnded
// arrives) → the new run's runStarted and records show the switch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { TrainerClient } from '../../src/link/trainer-client.js';
import { parseListeningLine, type ListeningInfo } from '../../src/link/listening-line.js';
import type { LayerStatsRecord, RunStartedRecord, ServerTelemetry } from '../../src/protocol/index.js';
import { until } from '../link/helpers.js';
import { python } from './python.js';

const EXAMPLE = join(__dirname, '..', '..', 'python', 'examples', 'gpt_brown.py');

async function startExample(): Promise<{ child: ChildProcess; info: ListeningInfo; stderr: string[] }> {
  const args = [EXAMPLE, '--port', '0', '--token', 'example-token', '--steps', '5', '--stats-every', '2', '--eval-every', '0',
    '--dim', '32', '--seq', '16', '--batch', '2', '--max-runs', '2', '--idle-timeout', '60', '--out', mkdtempSync(join(tmpdir(), 'mxscope-example-'))];
  const child = spawn(python(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const stderr: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  const info = await new Promise<ListeningInfo>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the example printed no listening line in 60 s; stderr: ${stderr.join('')}`)), 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const parsed = parseListeningLine(line);
      if (parsed) {
        clearTimeout(timer);
        resolve(parsed);
      }
    });
    child.once('exit', (code) => reject(new Error(`the example exited (${code}) before listening; stderr: ${stderr.join('')}`)));
  });
  return { child, info, stderr };
}

test('Switch Rotation + Start Next Run on the GPT example: the next run uses the new rotation', { timeout: 180_000 }, async () => {
  const { child, info, stderr } = await startExample();
  const records: ServerTelemetry[] = [];
  const client = new TrainerClient({ url: info.url, token: info.token, onTelemetry: (r) => records.push(r) });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    await until(() => client.state === 'connected', 'connect', 20_000);
    const runs: { started: RunStartedRecord; stats: LayerStatsRecord[] }[] = [];
    for (const rotation of ['none', 'hadamard'] as const) {
      await client.request({ type: 'setNextRunConfig', change: { gemms: { wgrad: { rotation }, dgrad: { rotation } } } });
      const ack = await client.request({ type: 'startRun' }); // right after the previous runEnded
      await until(() => records.some((r) => r.type === 'runEnded' && r.runId === ack.detail), `run ${rotation} to end`, 120_000);
      const mine = records.filter((r) => r.runId === ack.detail);
      runs.push({ started: mine.find((r): r is RunStartedRecord & ServerTelemetry => r.type === 'runStarted')!, stats: mine.filter((r): r is LayerStatsRecord & ServerTelemetry => r.type === 'layerStats') });
      const ended = mine.at(-1)!;
      assert.equal(ended.type === 'runEnded' ? ended.status : ended.type, 'completed');
    }
    const [plain, rotated] = runs;
    assert.equal(plain!.started.config.gemms.wgrad.rotation, 'none');
    assert.equal(rotated!.started.config.gemms.wgrad.rotation, 'hadamard', 'the new run started with the switched rotation');
    const head = (run: (typeof runs)[number]) => run.started.layers.find((l) => l.name === 'lm_head')!;
    assert.equal(head(plain!).outFeatures, 82, 'the vocabulary is the 82 characters of the text');
    assert.deepEqual(head(plain!).rotationFit?.dgrad, { status: 'none', dim: 82 });
    assert.deepEqual(head(rotated!).rotationFit?.dgrad, { status: 'padded', dim: 82, paddedTo: 96 }, 'the odd vocabulary is padded, not refused');
    const dgradX = (run: (typeof runs)[number]) => run.stats.find((r) => r.layer === 'lm_head' && r.gemm === 'dgrad' && r.step === 0)!.operands[0]!;
    assert.equal(dgradX(plain!).elements, 2 * 16 * 82);
    assert.equal(dgradX(rotated!).elements, 2 * 16 * 96, "the records show the rotated run's padded Dgrad operand");
    for (const run of runs) {
      const wgrad = run.stats.filter((r) => r.gemm === 'wgrad');
      assert.equal(wgrad.length, 3 * 9, 'steps 0, 2, 4 × 9 linears (4 per block + the tied lm_head)');
      for (const r of wgrad) assert.ok(r.wgradError && r.wgradError.relErr! > 0 && r.precision === 'mxfp4' && r.simulated === undefined);
    }
    assert.equal(await exited, 0, 'the example exits after --max-runs runs');
  } catch (error) {
    throw new Error(`${(error as Error).message}\nexample stderr: ${stderr.join('')}`, { cause: error });
  } finally {
    client.close();
    if (child.exitCode === null) child.kill();
  }
});

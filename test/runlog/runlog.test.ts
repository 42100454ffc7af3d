// Run logs reopen as written; torn or invalid lines are skipped with a warning and lose nothing
// else, including after a trainer process is killed mid-run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readRunLog, readRunLogLines, RunLogWriter, RUN_JSON, TELEMETRY_NDJSON } from '../../src/runlog/index.js';
import type { RunStartedRecord, TelemetryRecord } from '../../src/protocol/telemetry.js';
import { presetConfig } from '../../src/trainer/presets.js';

const started: RunStartedRecord = {
  type: 'runStarted',
  runId: 'r1',
  name: 'test',
  startedAt: '2026-01-01T00:00:00.000Z',
  trainer: { name: 'test', version: '0' },
  config: presetConfig('tiny'),
  layers: [],
};
const step = (n: number): TelemetryRecord => ({ type: 'step', runId: 'r1', step: n, tokens: 512 * (n + 1), loss: 5 - n / 10, lr: 1e-3, gradNorm: 1, stepMs: 10 });

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'mxscope-runlog-'));
}

test('a closed log reopens with exactly the records written', async () => {
  const dir = join(tempDir(), 'r1');
  const writer = new RunLogWriter(dir, started);
  const written = [step(0), step(1), { type: 'runEnded', runId: 'r1', step: 1, status: 'completed', reason: 'done', endedAt: '2026-01-01T00:00:01.000Z' } as const];
  for (const record of written) writer.append(record);
  writer.close();
  const { records, warnings } = await readRunLog(dir);
  assert.deepEqual(warnings, []);
  assert.deepEqual(records, [started, ...written]);
  assert.deepEqual(JSON.parse(readFileSync(join(dir, RUN_JSON), 'utf8')), started);
  assert.throws(() => writer.append(step(2)), /closed/);
  rmSync(dir, { recursive: true, force: true });
});

test('invalid and torn lines are skipped with a warning naming the line; the rest is kept', async () => {
  const dir = join(tempDir(), 'r1');
  const writer = new RunLogWriter(dir, started);
  writer.append(step(0));
  writer.close();
  const path = join(dir, TELEMETRY_NDJSON);
  appendFileSync(path, `${JSON.stringify({ ...step(1), loss: 'high' })}\n${JSON.stringify(step(2))}\n{"type":"step","runId":"r1","st`);
  const streamed: number[] = [];
  const summary = await readRunLogLines(dir, (record) => record.type === 'step' && streamed.push(record.step));
  assert.deepEqual(streamed, [0, 2]);
  assert.equal(summary.records, 3);
  assert.equal(summary.warnings.length, 2);
  assert.match(summary.warnings[0]!, /line 3: \.loss: expected a finite number/);
  assert.match(summary.warnings[1]!, /line 5: not valid JSON/);
  rmSync(dir, { recursive: true, force: true });
});

test('a line nested deeper than 64 levels is skipped before parsing, with a warning saying so', async () => {
  const dir = join(tempDir(), 'r1');
  const writer = new RunLogWriter(dir, started);
  writer.append(step(0));
  writer.close();
  const deep = (levels: number) => `${'['.repeat(levels)}0${']'.repeat(levels)}`;
  appendFileSync(join(dir, TELEMETRY_NDJSON), `${JSON.stringify(step(1)).slice(0, -1)},"x":${deep(64)}}\n${deep(1_000_000)}\n${JSON.stringify(step(2))}\n`);
  const summary = await readRunLogLines(dir, () => {});
  assert.equal(summary.records, 3);
  assert.deepEqual(summary.warnings.map((warning) => warning.replace(/^.* line (\d+): /, '$1: ')), [
    '3: nests JSON deeper than 64 levels (a record nests at most 5); skipped',
    '4: nests JSON deeper than 64 levels (a record nests at most 5); skipped',
  ]);
  rmSync(dir, { recursive: true, force: true });
});

test('the log of a trainer killed mid-run reloads up to the last complete line', async () => {
  const outDir = tempDir();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/train.ts', '--steps', '1000', '--stats-every', '2', '--out', outDir], { stdio: 'ignore' });
  const stepLines = (): number => {
    const [runId] = readdirSync(outDir);
    if (runId === undefined) return 0;
    try {
      return readFileSync(join(outDir, runId, TELEMETRY_NDJSON), 'utf8').split('\n').filter((line) => line.includes('"type":"step"')).length;
    } catch {
      return 0;
    }
  };
  const deadline = Date.now() + 60_000;
  while (stepLines() < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  assert.ok(stepLines() >= 3, 'the trainer wrote steps before it was killed');
  const runDir = join(outDir, readdirSync(outDir)[0]!);
  // A write cut off by the kill: the reader must skip it and keep everything before it.
  appendFileSync(join(runDir, TELEMETRY_NDJSON), '{"type":"layerStats","runId":');
  const { records, warnings } = await readRunLog(runDir);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /not valid JSON/);
  assert.equal(records[0]!.type, 'runStarted');
  const steps = records.flatMap((r) => (r.type === 'step' ? [r.step] : []));
  assert.deepEqual(steps, steps.map((_, i) => i), 'steps 0, 1, 2, … with none lost');
  assert.ok(records.some((r) => r.type === 'layerStats'));
  assert.ok(!records.some((r) => r.type === 'runEnded'));
  rmSync(outDir, { recursive: true, force: true });
});

// The checkpoint editor's host logic without VS Code: ready → progress → report; another rotation
// block → a new report; a hostile file → an error message for the page, never a throw.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkpointHostMessageSchema, type CheckpointHostMessage } from '../../src/protocol/checkpoint-webview.js';
import { check } from '../../src/protocol/validate.js';
import { CheckpointSession, type SessionTarget } from '../../src/checkpoint/session.js';
import { writeSampleCheckpoint } from './page.js';
import { withTempDir } from './temp-dir.js';

function session(target: SessionTarget, largeBytes?: number) {
  const posted: CheckpointHostMessage[] = [];
  const logged: string[] = [];
  // Every message must pass the schema the page checks it with.
  const s = new CheckpointSession(target, (m) => posted.push(check(checkpointHostMessageSchema, m)), (line) => logged.push(line), largeBytes);
  const settled = async (type: CheckpointHostMessage['type'], count = 1) => {
    for (let i = 0; i < 500 && posted.filter((m) => m.type === type).length < count; i++) await new Promise((r) => setTimeout(r, 5));
    return posted.filter((m) => m.type === type);
  };
  return { s, posted, logged, settled };
}

test('analyses on ready, again with another Hadamard block, and resends the result to a reloaded page', () =>
  withTempDir(async (dir) => {
    const path = join(dir, 'a.safetensors');
    await writeSampleCheckpoint(path);
    const { s, posted, settled } = session({ kind: 'analyse', path });
    s.onMessage({ type: 'ready' });
    const [first] = await settled('report');
    assert.equal(posted[0].type, 'progress');
    assert.equal(first.type === 'report' && first.report.options.hadamardBlock, 32);

    s.onMessage({ type: 'analyse', hadamardBlock: 64, mode: 'histogram', sqnrRows: 256 });
    const reports = await settled('report', 2);
    const second = reports[1];
    assert.ok(second.type === 'report');
    assert.equal(second.report.options.hadamardBlock, 64);
    assert.equal(second.report.tensors.find((t) => t.analysis)!.analysis!.sqnr, null, 'histogram-only pass');

    const before = posted.length;
    s.onMessage({ type: 'ready' });
    assert.deepEqual(posted.slice(before), [second], 'a reloaded page gets the last result without a new analysis');
    s.dispose();
  }));

test('a hostile file and an invalid webview message are reported, not thrown', () =>
  withTempDir(async (dir) => {
    const path = join(dir, 'bad.safetensors');
    await writeFile(path, Buffer.from('not a checkpoint at all'));
    const { s, settled, logged } = session({ kind: 'analyse', path });
    s.onMessage({ type: 'analyse', hadamardBlock: 48, mode: 'full', sqnrRows: 256 });
    assert.match(logged[0], /invalid message/);
    s.onMessage({ type: 'ready' });
    const [error] = await settled('error');
    assert.ok(error.type === 'error');
    assert.match(error.message, /bad\.safetensors: header length \d+ bytes exceeds the 100000000-byte limit/);

    const remote = session({ kind: 'unavailable', reason: 'vscode-vfs://x/y.safetensors is not a local file' });
    remote.s.onMessage({ type: 'ready' });
    assert.deepEqual(remote.posted, [{ type: 'error', title: 'Cannot open this checkpoint', message: 'vscode-vfs://x/y.safetensors is not a local file' }]);
  }));

test('a checkpoint above the large-file threshold opens with the histogram-only pass until the page asks for more', () =>
  withTempDir(async (dir) => {
    const path = join(dir, 'a.safetensors');
    await writeSampleCheckpoint(path);
    const { s, settled } = session({ kind: 'analyse', path }, 1024);
    s.onMessage({ type: 'ready' });
    const [first] = await settled('report');
    assert.ok(first.type === 'report');
    assert.equal(first.report.options.mode, 'histogram');
    s.onMessage({ type: 'analyse', hadamardBlock: 32, mode: 'full', sqnrRows: 0 });
    const [, second] = await settled('report', 2);
    assert.ok(second.type === 'report');
    assert.equal(second.report.options.mode, 'full');
    const oProj = second.report.tensors.find((t) => t.name === 'model.layers.0.mlp.down_proj.weight')!.analysis!;
    assert.equal(oProj.sqnr!.rowsUsed, oProj.rows, 'sqnrRows 0 measures every row');
    s.dispose();
  }));

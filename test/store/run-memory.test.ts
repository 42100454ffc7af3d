// Runs survive a window reload: a live run is remembered by the log directory its trainer announced,
// read back into a fresh store, and forgotten once removed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rememberRunLogs, restoreRunLogs } from '../../src/store/run-memory.js';
import { RunStore } from '../../src/store/run-store.js';
import { startRun } from '../../src/trainer/index.js';
import { microConfig } from '../trainer/micro.js';

test('a live run is remembered by its logDir, restored into a new store, and forgotten when removed', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-memory-'));
  try {
    const live = new RunStore();
    const saves: string[][] = [];
    const memory = rememberRunLogs(live, (dirs) => saves.push(dirs));
    const run = startRun({ config: { ...microConfig(), steps: 4 }, outDir, onRecord: (record) => live.ingest(record, 'live') });
    const ended = await run.done;
    assert.equal(ended.status, 'completed');
    assert.deepEqual(saves, [[run.dir]], 'saved once, when the run started, with the directory the trainer announced');
    const before = live.list()[0]!;

    const lines: string[] = [];
    const reloaded = new RunStore();
    const missing = join(outDir, 'deleted-run');
    assert.equal(await restoreRunLogs(reloaded, [missing, ...saves.at(-1)!], (line) => lines.push(line)), 1);
    assert.ok(lines.some((line) => line.includes(missing) && line.includes('not restoring')), `a missing run log is named: ${lines.join(' | ')}`);
    const after = reloaded.list();
    assert.equal(after.length, 1);
    assert.deepEqual(
      { runId: after[0]!.runId, status: after[0]!.status, lastStep: after[0]!.lastStep, lastLoss: after[0]!.lastLoss, source: after[0]!.source, dir: after[0]!.dir },
      { runId: before.runId, status: 'completed', lastStep: before.lastStep, lastLoss: before.lastLoss, source: 'loaded', dir: run.dir },
    );

    live.remove(before.runId);
    assert.deepEqual(saves.at(-1), [], 'a removed run is forgotten');
    memory.dispose();
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
});

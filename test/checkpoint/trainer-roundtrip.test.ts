// Checkpoints written by the trainer (mxscope-train) open, analyse and compare: every parameter and
// optimizer moment is there with its shape, weights change between steps, and metadata survives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from '../../src/checkpoint/analysis.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { compareCheckpoints } from '../../src/checkpoint/compare.js';
import { readSafetensors } from '../../src/checkpoint/safetensors.js';
import { readRunLog } from '../../src/runlog/index.js';
import { startRun } from '../../src/trainer/index.js';
import { microConfig } from '../trainer/micro.js';

test('trainer checkpoints analyse and compare across steps', async () => {
  const outDir = mkdtempSync(join(tmpdir(), 'mxscope-ckpt-run-'));
  try {
    const run = startRun({ config: { ...microConfig(), steps: 3 }, outDir, checkpointEvery: 1 });
    assert.equal((await run.done).status, 'completed');
    const saved = (await readRunLog(run.dir)).records.flatMap((r) => (r.type === 'checkpointSaved' ? [r.path] : []));
    assert.ok(saved.length >= 2, `expected checkpoints at several steps, got ${saved.length}`);

    const first = await openCheckpoint(saved[0]);
    const last = await openCheckpoint(saved.at(-1)!);
    try {
      assert.equal(first.metadata.format, 'mxscope-train');
      const loaded = await readSafetensors(saved[0]);
      assert.deepEqual(first.tensors.map((t) => t.name), [...loaded.keys()].sort());
      const weights = first.tensors.filter((t) => !t.name.startsWith('optimizer.') && t.shape.length === 2);
      assert.ok(weights.length > 0);

      const report = await analyseCheckpoint(first, { ...DEFAULT_ANALYSIS_OPTIONS, sqnrRows: 0 });
      for (const weight of weights) {
        const analysis = report.tensors.find((t) => t.name === weight.name)!.analysis!;
        assert.equal(analysis.blocks, weight.shape[0] * Math.ceil(weight.shape[1] / 32), weight.name);
        assert.ok(analysis.sqnr!.noRotationDb! > 5, `${weight.name}: random init quantizes to a sane SQNR`);
      }

      const comparison = await compareCheckpoints(first, last, { chunkBytes: 1 << 16 });
      assert.equal(comparison.matched.length, first.tensors.length);
      assert.deepEqual([comparison.onlyInA, comparison.onlyInB], [[], []]);
      const changed = comparison.matched.filter((d) => weights.some((w) => w.name === d.name));
      assert.ok(changed.every((d) => d.relativeChange !== null && d.relativeChange > 0), 'training moved every weight matrix');
      assert.ok(changed.every((d) => d.scaleShift !== null));
    } finally {
      await first.close();
      await last.close();
    }
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
});

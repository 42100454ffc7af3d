import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Rng } from '../../src/mx/index.js';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { compareCheckpoints, earthMoversDistance } from '../../src/checkpoint/compare.js';
import { writeSafetensors, type Float32Tensor } from '../../src/checkpoint/safetensors.js';
import { withTempDir } from './temp-dir.js';

const random = (seed: number, length: number) => {
  const rng = new Rng(seed);
  return Float32Array.from({ length }, () => rng.nextFloat() - 0.5);
};
const f32 = (name: string, shape: number[], data: Float32Array): Float32Tensor => ({ name, dtype: 'F32', shape, data });

test('matches tensors by name, reports relative change and scale shift, largest first, and lists one-sided tensors', () =>
  withTempDir(async (dir) => {
    const base = random(1, 64 * 64);
    const nudge = random(2, 64 * 64);
    const nudged = base.map((x, i) => x + 0.01 * nudge[i]);
    const small = random(3, 8 * 32);
    await writeSafetensors(join(dir, 'a.safetensors'), [
      f32('big.weight', [64, 64], base),
      f32('doubled.weight', [8, 32], small),
      f32('reshaped.weight', [4, 8], new Float32Array(32)),
      f32('only.in.a', [3], new Float32Array(3)),
    ]);
    await writeSafetensors(join(dir, 'b.safetensors'), [
      f32('doubled.weight', [8, 32], small.map((x) => 2 * x)),
      f32('big.weight', [64, 64], nudged),
      f32('reshaped.weight', [8, 4], new Float32Array(32)),
      f32('only.in.b', [2, 2], new Float32Array(4)),
    ]);
    const a = await openCheckpoint(join(dir, 'a.safetensors'));
    const b = await openCheckpoint(join(dir, 'b.safetensors'));
    // A chunk of 5 rows of the big tensor: the lockstep streaming must line the chunks up.
    const comparison = await compareCheckpoints(a, b, { chunkBytes: 5 * 64 * 4 });
    await a.close();
    await b.close();

    assert.deepEqual(comparison.matched.map((diff) => diff.name), ['big.weight', 'doubled.weight', 'reshaped.weight']);
    assert.deepEqual(comparison.onlyInA.map((t) => t.name), ['only.in.a']);
    assert.deepEqual(comparison.onlyInB.map((t) => [t.name, t.shape]), [['only.in.b', [2, 2]]]);

    const [big, doubled, reshaped] = comparison.matched;
    let diffSq = 0;
    let normSq = 0;
    base.forEach((x, i) => {
      diffSq += (x - nudged[i]) ** 2;
      normSq += x * x;
    });
    assert.ok(Math.abs(big.relativeChange! - Math.sqrt(diffSq / normSq)) < 1e-12);
    assert.ok(big.scaleShift!.emd < 0.2, 'a 1% nudge barely moves the scales');

    assert.ok(Math.abs(doubled.relativeChange! - 1) < 1e-12, '‖2A − A‖ / ‖A‖ = 1');
    assert.equal(doubled.scaleShift!.meanShift, 1, 'doubling every weight moves every scale up one binade');
    assert.equal(doubled.scaleShift!.emd, 1);

    assert.equal(reshaped.relativeChange, null);
    assert.match(reshaped.note!, /shape differs: \[4, 8\] vs \[8, 4\]/);
  }));

test('earth mover\'s distance: 0 for the same distribution whatever the counts, spread changes count', () => {
  assert.equal(earthMoversDistance({ minExp: -3, counts: [1, 2, 1], nanBlocks: 0 }, { minExp: -3, counts: [10, 20, 10], nanBlocks: 5 }), 0);
  assert.equal(earthMoversDistance({ minExp: 0, counts: [0, 4], nanBlocks: 0 }, { minExp: 0, counts: [2, 0, 2], nanBlocks: 0 }), 1);
});

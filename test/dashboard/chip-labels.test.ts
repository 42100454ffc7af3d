import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chipLabelEnds, chipLabels } from '../../webview/dashboard/model/chip-labels.js';

const at = '2026-11-29T10:46:02.000Z';
const run = (name: string, seed?: number, startedAt = at) => ({ name, seed, startedAt });

test('one run keeps its whole name', () => {
  assert.deepEqual(chipLabels([run('tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4')]), ['tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4']);
  assert.deepEqual(chipLabels([]), []);
});

test("an A/B of the trainer's recipe names shows the parts that differ, with one shared part for context", () => {
  assert.deepEqual(
    chipLabels([run('tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4'), run('tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4 · H16')]),
    ['… wgrad mxfp4', '… wgrad mxfp4 · H16'],
  );
  assert.deepEqual(
    chipLabels([run('tiny · fprop mxfp4 · rceil · dgrad mxfp4 · rceil · wgrad mxfp4 · H16 · rceil'), run('tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4 · H16')]),
    ['… fprop mxfp4 · rceil · dgrad mxfp4 · rceil · wgrad mxfp4 · H16 · rceil', '… fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4 · H16'],
  );
  assert.deepEqual(
    chipLabels([run('bf16 · small · lr 3e-4 · 2000 steps'), run('mxfp4 · small · lr 3e-4 · 2000 steps'), run('mxfp4 · H16 · small · lr 3e-4 · 2000 steps')]),
    ['bf16 · small …', 'mxfp4 · small …', 'mxfp4 · H16 · small …'],
    'shared parts at the end are left out too',
  );
});

test('names with nothing shared, or one shared part only, stay whole', () => {
  assert.deepEqual(chipLabels([run('bf16 baseline'), run('mxfp4 · H16'), run('mxfp4 · RHT16')]), ['bf16 baseline', 'mxfp4 · H16', 'mxfp4 · RHT16']);
  assert.deepEqual(chipLabels([run('mxfp4 · H16'), run('mxfp4 · RHT16')]), ['mxfp4 · H16', 'mxfp4 · RHT16']);
  assert.deepEqual(chipLabels([run('a · x · b'), run('a · b')]), ['a · x · b', 'a · b']);
});

test('runs of one name are told apart by their seeds, else their start times, in front where the chip cannot cut them off', () => {
  const h16 = 'tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4 · H16';
  assert.deepEqual(
    chipLabels([run(h16, 1), run(h16, 2), run('tiny · fprop mxfp4 · dgrad mxfp4 · wgrad mxfp4', 1)]),
    ['seed 1 · … wgrad mxfp4 · H16', 'seed 2 · … wgrad mxfp4 · H16', '… wgrad mxfp4'],
  );
  assert.deepEqual(chipLabels([run(h16, 3), run(h16, 4)]), [`seed 3 · ${h16}`, `seed 4 · ${h16}`], 'one name throughout: whole');
  assert.deepEqual(
    chipLabels([run('llama-8b · h16', 7, '2026-11-29T10:46:02.000Z'), run('llama-8b · h16', 7, '2026-11-29T11:02:40.000Z')]),
    ['10:46:02 · llama-8b · h16', '11:02:40 · llama-8b · h16'],
    'the same seed: the start time',
  );
  assert.deepEqual(chipLabels([run('same', undefined, 'not a time'), run('same', undefined, 'not a time')]), ['same', 'same'], 'nothing to tell them apart by: the names');
});

test("a label's last part is what a narrow chip keeps beside its cut head", () => {
  assert.deepEqual(chipLabelEnds('… fprop mxfp4 · rceil · wgrad mxfp4 · H16 · rceil'), { head: '… fprop mxfp4 · rceil · wgrad mxfp4 · H16', last: ' · rceil' });
  assert.deepEqual(chipLabelEnds('bf16 baseline'), { head: 'bf16 baseline', last: '' });
});

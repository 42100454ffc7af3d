import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { readSafetensors, writeSafetensors } from '../../src/checkpoint/safetensors.js';
import { withTempDir } from './temp-dir.js';

test('writeSafetensors → readSafetensors round-trips names, shapes and exact values', () =>
  withTempDir(async (dir) => {
    const path = join(dir, 'step-10.safetensors');
    const weight = Float32Array.from({ length: 6 * 64 }, (_, i) => Math.sin(i) * 10 ** ((i % 7) - 3));
    weight[5] = -0;
    const bias = Float32Array.from([1.5, -2.25, 3e-40]);
    await writeSafetensors(path, [
      { name: 'blocks.0.attn.q.weight', dtype: 'F32', shape: [6, 64], data: weight },
      { name: 'blocks.0.attn.q.bias', dtype: 'F32', shape: [3], data: bias },
    ], { step: '10' });
    const loaded = await readSafetensors(path);
    assert.deepEqual([...loaded.keys()].sort(), ['blocks.0.attn.q.bias', 'blocks.0.attn.q.weight']);
    assert.deepEqual(loaded.get('blocks.0.attn.q.weight')!.shape, [6, 64]);
    assert.deepEqual(loaded.get('blocks.0.attn.q.weight')!.data, weight);
    assert.ok(Object.is(loaded.get('blocks.0.attn.q.weight')!.data[5], -0));
    assert.deepEqual(loaded.get('blocks.0.attn.q.bias')!.data, bias);
    const bytes = await readFile(path);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    assert.equal(headerLength % 8, 0, 'data section starts 8-byte aligned');
    assert.deepEqual(JSON.parse(bytes.subarray(8, 8 + headerLength).toString()).__metadata__, { step: '10' });
    assert.deepEqual(await readdir(dir), ['step-10.safetensors'], 'no temporary file left behind');
  }));

test('writeSafetensors refuses a shape that does not match the data', () =>
  withTempDir(async (dir) => {
    await assert.rejects(
      writeSafetensors(join(dir, 'bad.safetensors'), [{ name: 'w', dtype: 'F32', shape: [2, 3], data: new Float32Array(5) }]),
      /tensor "w" has shape \[2, 3\] \(6 elements\) but 5 F32 values/,
    );
  }));

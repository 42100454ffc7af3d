// Hostile and broken files: each is refused with a CheckpointFormatError naming the problem.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { openCheckpoint } from '../../src/checkpoint/checkpoint.js';
import { CheckpointFormatError } from '../../src/checkpoint/header.js';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mxscope-hostile-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/** A file laid out by hand: the given 8-byte length (default: the header's), header text, data bytes. */
function rawFile(header: string, dataBytes: number, declaredLength?: bigint): Buffer {
  const text = Buffer.from(header, 'utf8');
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(declaredLength ?? BigInt(text.length));
  return Buffer.concat([prefix, text, Buffer.alloc(dataBytes)]);
}

async function assertRefused(name: string, bytes: Buffer, problem: RegExp): Promise<void> {
  const path = join(dir, name);
  await writeFile(path, bytes);
  await assert.rejects(openCheckpoint(path), (error: unknown) => {
    assert.ok(error instanceof CheckpointFormatError, `expected CheckpointFormatError, got ${error}`);
    assert.ok(error.message.startsWith(path), 'the message names the file');
    assert.match(error.problem, problem);
    return true;
  });
}

const entry = (dtype: string, shape: number[], begin: number, end: number) => ({ dtype, shape, data_offsets: [begin, end] });

test('a well-formed hand-built file opens (the cases below differ from it in one thing each)', async () => {
  const path = join(dir, 'good.safetensors');
  await writeFile(path, rawFile(JSON.stringify({ a: entry('F32', [2, 2], 0, 16), b: entry('BF16', [4], 16, 24) }), 24));
  const checkpoint = await openCheckpoint(path);
  assert.deepEqual(checkpoint.tensors.map((t) => t.name), ['a', 'b']);
  await checkpoint.close();
});

test('header length past the end of the file', () =>
  assertRefused('past-end.safetensors', rawFile(JSON.stringify({ a: entry('F32', [1], 0, 4) }), 4, 5000n), /header length 5000 bytes runs past the end of the file \(\d+ bytes\)/));

test('file too short to hold the header length', () => assertRefused('tiny.safetensors', Buffer.from([1, 0, 0]), /too short for the 8-byte header length/));

test('huge header length is refused before anything is read', () =>
  assertRefused('huge.safetensors', rawFile('{}', 0, 1n << 40n), /header length 1099511627776 bytes exceeds the 16777216-byte limit/));

test('header that is not JSON', () => assertRefused('not-json.safetensors', rawFile('{"a": {"dtype": "F32",', 0), /header is not valid UTF-8 JSON/));

test('header that is JSON but not an object', () => assertRefused('array.safetensors', rawFile('[1, 2]', 0), /header must be a JSON object/));

test('header that is not UTF-8', () => {
  const header = Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]); // {"\xff":1} with a lone 0xff byte
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(header.length));
  return assertRefused('latin1.safetensors', Buffer.concat([prefix, header]), /not valid UTF-8/);
});

test('offsets that overlap another tensor', () =>
  assertRefused('overlap.safetensors', rawFile(JSON.stringify({ a: entry('F32', [4], 0, 16), b: entry('F32', [2], 8, 16) }), 16), /tensor "b": data_offsets \[8, 16\] overlap tensor "a" \[0, 16\]/));

test('offsets outside the data section', () =>
  assertRefused('outside.safetensors', rawFile(JSON.stringify({ a: entry('F32', [4], 0, 16), b: entry('F32', [4], 16, 32) }), 16), /tensor "b": data_offsets \[16, 32\] point outside the data section \(16 bytes\)/));

test('offsets that end before they begin', () => assertRefused('reversed.safetensors', rawFile(JSON.stringify({ a: entry('F32', [0], 8, 4) }), 8), /data_offsets \[8, 4\] end before they begin/));

test('a gap between tensors, and trailing bytes after the last one', async () => {
  await assertRefused('gap.safetensors', rawFile(JSON.stringify({ a: entry('F32', [1], 0, 4), b: entry('F32', [1], 8, 12) }), 12), /leave bytes 4\.\.8 unused/);
  await assertRefused('trailing.safetensors', rawFile(JSON.stringify({ a: entry('F32', [1], 0, 4) }), 12), /data section is 12 bytes but the tensors cover only 4/);
});

test('dtype/shape/size mismatch', () =>
  assertRefused('mismatch.safetensors', rawFile(JSON.stringify({ w: entry('BF16', [3, 4], 0, 16) }), 16), /tensor "w": BF16 shape \[3, 4\] needs 24 bytes but data_offsets \[0, 16\] hold 16/));

test('unknown dtype, bad shape, bad offsets, bad metadata', async () => {
  await assertRefused('dtype.safetensors', rawFile(JSON.stringify({ w: entry('F128', [1], 0, 16) }), 16), /tensor "w": unsupported dtype "F128"/);
  await assertRefused('shape.safetensors', rawFile(JSON.stringify({ w: entry('F32', [-1], 0, 4) }), 4), /shape must be an array of non-negative integers, got \[-1\]/);
  await assertRefused('offsets.safetensors', rawFile(JSON.stringify({ w: { dtype: 'F32', shape: [1], data_offsets: [0] } }), 4), /data_offsets must be \[begin, end\]/);
  await assertRefused('overflow.safetensors', rawFile(JSON.stringify({ w: entry('F32', [2 ** 30, 2 ** 30, 2 ** 30], 0, 4) }), 4), /has too many elements/);
  await assertRefused('metadata.safetensors', rawFile(JSON.stringify({ __metadata__: { step: 10 } }), 0), /"__metadata__"."step" must be a string/);
});

test('shard index problems: not JSON, escaping paths, tensors missing or unlisted', async () => {
  const shard = rawFile(JSON.stringify({ a: entry('F32', [1], 0, 4) }), 4);
  await writeFile(join(dir, 'shard-1.safetensors'), shard);
  const index = (weightMap: unknown) => Buffer.from(JSON.stringify({ metadata: {}, weight_map: weightMap }));
  await assertRefused('bad.safetensors.index.json', Buffer.from('{"weight_map": '), /shard index is not valid JSON/);
  await assertRefused('escape.safetensors.index.json', index({ a: '../etc/passwd' }), /weight_map\["a"\] must be a file name in the index's folder/);
  await assertRefused('missing.safetensors.index.json', index({ a: 'shard-1.safetensors', b: 'shard-1.safetensors' }), /weight_map lists tensor "b" but shard shard-1.safetensors does not hold it/);
  await writeFile(join(dir, 'shard-2.safetensors'), rawFile(JSON.stringify({ a: entry('F32', [1], 0, 4), c: entry('F32', [1], 4, 8) }), 8));
  await assertRefused('unlisted.safetensors.index.json', index({ a: 'shard-2.safetensors' }), /shard shard-2.safetensors holds tensor "c" that weight_map does not list/);
  await assertRefused('moved.safetensors.index.json', index({ a: 'shard-1.safetensors', c: 'shard-1.safetensors' }), /weight_map lists tensor "c"/);
  await assertRefused('empty.safetensors.index.json', index({}), /empty "weight_map"/);
  await assertRefused('no-map.safetensors.index.json', Buffer.from('{"metadata": {}}'), /needs a "weight_map" object/);
});

test('a header nested deeper than 64 levels is refused before parsing, fast', async () => {
  const deep = `{"a":${'['.repeat(5_000_000)}`;
  const started = performance.now();
  await assertRefused('deep.safetensors', rawFile(deep, 0), /header nests JSON deeper than 64 levels/);
  assert.ok(performance.now() - started < 2000, `${performance.now() - started} ms`);
});

test('a header over 16 MiB is refused from its length alone', async () => {
  await assertRefused('big-header.safetensors', rawFile('{}', 0, BigInt(16 * 1024 * 1024 + 1)), /exceeds the 16777216-byte limit/);
});

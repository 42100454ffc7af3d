// The reader against files written by another implementation (test/fixtures/safetensors/make_fixtures.py, from the
// published format description), including a sharded checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openCheckpoint, type CheckpointTensor } from '../../src/checkpoint/checkpoint.js';
import type { NextRead } from '../../src/checkpoint/file.js';
import { readSafetensors } from '../../src/checkpoint/safetensors.js';

const fixtures = join(__dirname, '..', 'fixtures', 'safetensors') + '/';
/** The values make_fixtures.py stores in every float tensor. */
const fixtureValue = (i: number) => ((i % 15) - 7) * 2 ** ((i % 5) - 2);

test('decodes BF16, F16, F8_E4M3, F8_E5M2 and F32 tensors written by another implementation', async () => {
  const tensors = await readSafetensors(`${fixtures}mixed.safetensors`).catch((error: Error) => error);
  // The fixture holds an I64 tensor, which readSafetensors refuses by name.
  assert.match(String(tensors), /tensor "step" is I64/);

  const checkpoint = await openCheckpoint(`${fixtures}mixed.safetensors`);
  try {
    assert.deepEqual(checkpoint.metadata, { format: 'pt', written_by: 'make_fixtures.py' });
    assert.deepEqual(
      checkpoint.tensors.map((t) => [t.name, t.dtype, t.shape.join('x')]),
      [
        ['blocks.0.attn.k.weight', 'F8_E5M2', '2x32'],
        ['blocks.0.attn.q.weight', 'F8_E4M3', '2x32'],
        ['blocks.0.mlp.up.weight', 'F16', '4x64'],
        ['blocks.0.norm.weight', 'F32', '32'],
        ['model.embed.weight', 'BF16', '8x32'],
        ['step', 'I64', ''],
      ],
    );
    for (const tensor of checkpoint.tensors.filter((t) => t.dtype !== 'I64')) {
      const values = await tensor.file.readFloat32(tensor.name);
      assert.equal(values.length, tensor.elements);
      values.forEach((v, i) => assert.equal(v, fixtureValue(i), `${tensor.name}[${i}]`));
    }
  } finally {
    await checkpoint.close();
  }
});

test('opens a sharded checkpoint through its index and reads tensors from both shards', async () => {
  const checkpoint = await openCheckpoint(`${fixtures}sharded/model.safetensors.index.json`);
  try {
    assert.equal(checkpoint.shards.length, 2);
    assert.deepEqual(checkpoint.tensors.map((t) => t.name), ['blocks.0.attn.k.weight', 'blocks.0.attn.q.weight', 'blocks.1.attn.q.weight', 'lm_head.weight']);
    assert.equal(checkpoint.dataBytes, 2 * (4 * 64 * 2) + 4 * 64 * 4 + 16 * 64 * 2);
    const lmHead = checkpoint.tensors.find((t) => t.name === 'lm_head.weight')!;
    assert.match(lmHead.file.path, /model-00002-of-00002/);
    const values = await lmHead.file.readFloat32('lm_head.weight');
    values.forEach((v, i) => assert.equal(v, fixtureValue(i)));
  } finally {
    await checkpoint.close();
  }
});

test('chunked reads cover a tensor exactly, in order, whatever the chunk size', async () => {
  const checkpoint = await openCheckpoint(`${fixtures}mixed.safetensors`);
  try {
    const tensor = checkpoint.tensors.find((t) => t.name === 'model.embed.weight')!;
    const whole = new Uint8Array(tensor.byteLength);
    let at = 0;
    for await (const chunk of tensor.file.chunks(tensor, 7)) {
      assert.ok(chunk.byteLength <= 14);
      whole.set(chunk, at);
      at += chunk.byteLength;
    }
    assert.equal(at, tensor.byteLength);
    const decoded = new Float32Array(new Uint32Array(Array.from({ length: tensor.elements }, (_, i) => (whole[2 * i] | (whole[2 * i + 1] << 8)) << 16)).buffer);
    decoded.forEach((v, i) => assert.equal(v, fixtureValue(i)));
  } finally {
    await checkpoint.close();
  }
});

test('a caller that stops reading chunks early can close the file at once', async () => {
  const checkpoint = await openCheckpoint(`${fixtures}mixed.safetensors`);
  const tensor = checkpoint.tensors.find((t) => t.name === 'model.embed.weight')!;
  for await (const chunk of tensor.file.chunks(tensor, 32)) {
    assert.equal(chunk.byteLength, 64);
    break; // the read of the second chunk is already in flight here
  }
  await checkpoint.close();
});

/** Every byte of `tensor` through `chunks` (chunks of `elements`, through `buffers`, reading `then` ahead). */
async function bytesOf(tensor: CheckpointTensor, elements: number, buffers?: readonly [Uint8Array, Uint8Array], then?: NextRead, onChunk?: () => void): Promise<number[]> {
  const bytes: number[] = [];
  for await (const chunk of tensor.file.chunks(tensor, elements, buffers, then)) {
    bytes.push(...chunk);
    onChunk?.();
  }
  return bytes;
}

test('reading ahead across tensors: the next tensor\'s first chunk is read during this one\'s last, and every tensor reads back exactly', async () => {
  const checkpoint = await openCheckpoint(`${fixtures}mixed.safetensors`);
  try {
    const [k, q, up] = ['blocks.0.attn.k.weight', 'blocks.0.attn.q.weight', 'blocks.0.mlp.up.weight'].map((name) => checkpoint.tensors.find((t) => t.name === name)!);
    const plain = await Promise.all([k, q, up].map((tensor) => bytesOf(tensor, tensor.elements)));
    // Reads the file issued, by offset (the handle is the file's own: spied on here).
    const file = k.file as unknown as { handle: { read: (...args: unknown[]) => Promise<unknown> } };
    const offsets: number[] = [];
    const read = file.handle.read.bind(file.handle);
    file.handle.read = (...args: unknown[]) => (offsets.push(args[3] as number), read(...args));
    const buffers: [Uint8Array, Uint8Array] = [new Uint8Array(64), new Uint8Array(64)];
    let seenAhead = false;
    const kBytes = await bytesOf(k, 16, buffers, { info: q, chunkElements: 32 }, () => (seenAhead ||= offsets.includes(q.fileOffset)));
    assert.ok(seenAhead, "q's first chunk was requested while k's chunks were being handed out");
    assert.deepEqual(kBytes, plain[0]);
    assert.deepEqual(await bytesOf(q, 32, buffers, { info: up, chunkElements: 32 }), plain[1], 'q from the chunk read ahead, then its own');
    // The caller reads another tensor than the one read ahead (up), or in another chunk size: the read ahead is waited out, not used.
    assert.deepEqual(await bytesOf(k, 16, buffers), plain[0]);
    assert.deepEqual(await bytesOf(q, 16, buffers, { info: up, chunkElements: 32 }), plain[1]);
    assert.deepEqual(await bytesOf(up, 16, buffers), plain[2], 'up in 16-element chunks though 32 were read ahead');
    assert.equal(offsets.filter((offset) => offset === up.fileOffset).length, 3, 'up\'s first chunk: read ahead after each q, then read again in the size asked for');
  } finally {
    await checkpoint.close();
  }
});

test('a chunk read ahead is never read into a buffer too small for it, and settle waits it out', async () => {
  const checkpoint = await openCheckpoint(`${fixtures}mixed.safetensors`);
  try {
    const [k, up] = ['blocks.0.attn.k.weight', 'blocks.0.mlp.up.weight'].map((name) => checkpoint.tensors.find((t) => t.name === name)!);
    const small: [Uint8Array, Uint8Array] = [new Uint8Array(32), new Uint8Array(32)];
    await bytesOf(k, 32, small, { info: up, chunkElements: 64 }); // up's first chunk (128 bytes) does not fit: no read ahead
    assert.equal((k.file as unknown as { ahead?: unknown }).ahead, undefined);
    await bytesOf(k, 32, small, { info: up, chunkElements: 16 });
    assert.notEqual((k.file as unknown as { ahead?: unknown }).ahead, undefined);
    await k.file.settle();
    assert.equal((k.file as unknown as { ahead?: unknown }).ahead, undefined);
  } finally {
    await checkpoint.close();
  }
});

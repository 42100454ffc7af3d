// Attention's WebAssembly pass (src/trainer/attention-wasm.ts: every per-head product, softmax and RoPE
// permute in one WebAssembly memory) against the loop it replaces, which runs the same kernels one
// product at a time through src/mx's gemm: the same bits, forward and backward.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mxBackendInUse, Rng } from '../../src/mx/index.js';
import { CausalAttention, type AttentionShape } from '../../src/trainer/attention.js';
import { loadAttentionKernel } from '../../src/trainer/attention-wasm.js';
import { trainerKernels } from '../../src/trainer/ops.js';

function random(n: number, rng: Rng, spread: number): Float32Array {
  return Float32Array.from({ length: n }, () => (rng.nextFloat() - 0.5) * spread);
}

const bits = (values: Float32Array): number[] => Array.from(new Uint32Array(values.buffer, values.byteOffset, values.length));

/** Two forward/backward rounds (the second reuses every buffer), returning each round's outputs. */
function run(attention: CausalAttention, shape: AttentionShape, seed: number): Float32Array[] {
  const rng = new Rng(seed);
  const size = shape.batch * shape.seqLen * shape.heads * shape.headDim;
  const outputs: Float32Array[] = [];
  for (let round = 0; round < 2; round++) {
    const [q, k, v, dOut] = [random(size, rng, 6), random(size, rng, 6), random(size, rng, 2), random(size, rng, 2)];
    const [out, dq, dk, dv] = Array.from({ length: 4 }, () => new Float32Array(size));
    attention.forward(q, k, v, out);
    attention.backward(dOut, dq, dk, dv);
    outputs.push(out, dq, dk, dv);
  }
  return outputs;
}

test('the WebAssembly attention pass gives the per-head loop its bits, forward and backward', () => {
  assert.ok(trainerKernels() && mxBackendInUse() === 'wasm', 'the WebAssembly kernels should be selected (test/start-up.ts)');
  for (const shape of [{ batch: 2, seqLen: 8, heads: 2, headDim: 8 }, { batch: 3, seqLen: 64, heads: 4, headDim: 16 }, { batch: 1, seqLen: 12, heads: 3, headDim: 4 }]) {
    const fused = run(new CausalAttention(shape), shape, 5);
    const loop = run(new CausalAttention(shape, () => undefined), shape, 5);
    const names = ['out', 'dq', 'dk', 'dv'];
    fused.forEach((values, i) => assert.deepEqual(bits(values), bits(loop[i]!), `${JSON.stringify(shape)} round ${i >> 2}: ${names[i % 4]}`));
  }
});

test('shapes the WebAssembly pass cannot take run the loop', () => {
  const shape = { batch: 1, seqLen: 6, heads: 2, headDim: 6 };
  assert.equal(loadAttentionKernel(shape, new Float32Array(9), new Float32Array(9)), undefined, 'seqLen and headDim must be multiples of 4');
  const fused = run(new CausalAttention(shape), shape, 9);
  const loop = run(new CausalAttention(shape, () => undefined), shape, 9);
  fused.forEach((values, i) => assert.deepEqual(bits(values), bits(loop[i]!)));
  assert.ok(fused[0]!.some((x) => x !== 0), 'the attention produced output');
});

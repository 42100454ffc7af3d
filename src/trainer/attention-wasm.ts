/**
 * Causal attention's whole forward and backward pass in one WebAssembly memory: the GEMM module
 * (src/wasm/gemm.wat) and the trainer's kernels (src/wasm/trainer-ops.wat) instantiated on the same
 * memory, so the per-head tensors, the probabilities and the score gradients never leave it. Only
 * q, k, v and out (forward) and their gradients (backward) cross, one copy each. The kernels and
 * their arguments are those of the loop in src/trainer/attention.ts (which copies every operand of
 * every per-head product in and out), so the results are the same bits.
 */
import { WASM_BASE64 as GEMM_BASE64 } from '../wasm/generated/gemm.js';
import { WASM_BASE64 as OPS_BASE64 } from '../wasm/generated/trainer-ops.js';
import { align16, tryLoad } from '../mx/wasm-arena.js';
import type { AttentionShape } from './attention.js';

interface GemmExports {
  gemm(M: number, N: number, K: number, a: number, transA: number, b: number, transB: number, c: number, accumulate: number, ap: number, bp: number): void;
}

interface OpsExports {
  softmax_causal(p: number, seq: number, scale: number): void;
  softmax_causal_backward(dS: number, p: number, seq: number, scale: number): void;
  rope_permute(src: number, dst: number, cos: number, sin: number, seqLen: number, heads: number, headDim: number, rope: number, split: number): void;
}

export interface AttentionKernel {
  /** out [tokens, dim] = attention(q, k, v); keeps what the backward pass needs in its memory. */
  forward(q: Float32Array, k: Float32Array, v: Float32Array, out: Float32Array): void;
  /** ∂L/∂q, ∂L/∂k, ∂L/∂v from ∂L/∂out and the last forward. */
  backward(dOut: Float32Array, dq: Float32Array, dk: Float32Array, dv: Float32Array): void;
}

/** Bytes 0..31 are the GEMM's scratch for partial tiles. */
const FIRST_FREE = 64;

/**
 * A kernel for one attention layer (its memory holds that layer's forward state), or undefined where
 * WebAssembly is unavailable or the shape does not fit the kernels (seqLen and headDim multiples of 4).
 */
export function loadAttentionKernel(shape: AttentionShape, cos: Float32Array, sin: Float32Array): AttentionKernel | undefined {
  const { batch, seqLen, heads, headDim } = shape;
  if (seqLen % 4 !== 0 || headDim % 4 !== 0) return undefined;
  const arena = tryLoad<OpsExports>(OPS_BASE64);
  if (!arena) return undefined;
  const ops = arena.exports;
  const { gemm } = arena.attach<GemmExports>(GEMM_BASE64);

  // The layout, in bytes: tables, per-head tensors, probabilities, one [tokens, dim] staging tensor
  // for what crosses, the score gradient of one head and the GEMM's packing space.
  const headBytes = 4 * batch * heads * seqLen * headDim;
  const tableBytes = 4 * seqLen * (headDim / 2);
  let end = FIRST_FREE;
  const take = (bytes: number): number => {
    const at = end;
    end = align16(end + bytes);
    return at;
  };
  const [cosAt, sinAt] = [take(tableBytes), take(tableBytes)];
  const [qh, kh, vh, headOut, dHead, dKh, dVh, io] = Array.from({ length: 8 }, () => take(headBytes));
  const probs = take(4 * batch * heads * seqLen * seqLen);
  const dS = take(4 * seqLen * seqLen);
  // Packed panels of the largest products: A is 4·⌈M/4⌉ × K, B is K × 8·⌈N/8⌉ (M = seqLen in all of them).
  const ap = take(4 * seqLen * Math.max(seqLen, headDim));
  const bp = take(4 * Math.max(Math.ceil(seqLen / 8) * 8 * headDim, Math.ceil(headDim / 8) * 8 * seqLen));
  arena.ensure(end);
  arena.f32.set(cos.subarray(0, tableBytes >> 2), cosAt >> 2);
  arena.f32.set(sin.subarray(0, tableBytes >> 2), sinAt >> 2);

  const tokensFloats = headBytes >> 2;
  const perBatch = seqLen * heads * headDim;
  const scale = 1 / Math.sqrt(headDim);
  const headStride = 4 * seqLen * headDim;
  const probStride = 4 * seqLen * seqLen;
  /** [tokens, dim] in `io` ↔ per-head `heads`, one batch element (the same span in both layouts) at a time. */
  const permute = (from: number, to: number, rope: -1 | 0 | 1, split: boolean): void => {
    for (let b = 0; b < batch; b++) ops.rope_permute(from + 4 * b * perBatch, to + 4 * b * perBatch, cosAt, sinAt, seqLen, heads, headDim, rope, split ? 1 : 0);
  };
  const load = (src: Float32Array, to: number, rope: 0 | 1): void => {
    arena.f32.set(src.subarray(0, tokensFloats), io >> 2);
    permute(io, to, rope, true);
  };
  const store = (from: number, dst: Float32Array, rope: -1 | 0): void => {
    permute(from, io, rope, false);
    dst.set(arena.f32.subarray(io >> 2, (io >> 2) + tokensFloats));
  };
  const product = (M: number, N: number, K: number, a: number, transA: boolean, b: number, transB: boolean, c: number): void =>
    gemm(M, N, K, a, transA ? 1 : 0, b, transB ? 1 : 0, c, 0, ap, bp);

  return {
    forward(q, k, v, out) {
      load(q, qh, 1);
      load(k, kh, 1);
      load(v, vh, 0);
      for (let bh = 0; bh < batch * heads; bh++) {
        const [head, p] = [bh * headStride, probs + bh * probStride];
        product(seqLen, seqLen, headDim, qh + head, false, kh + head, true, p);
        ops.softmax_causal(p, seqLen, scale);
        product(seqLen, headDim, seqLen, p, false, vh + head, false, headOut + head);
      }
      store(headOut, out, 0);
    },
    backward(dOut, dq, dk, dv) {
      const dQh = headOut; // the forward output is no longer needed: ∂q per head goes there
      load(dOut, dHead, 0);
      for (let bh = 0; bh < batch * heads; bh++) {
        const [head, p] = [bh * headStride, probs + bh * probStride];
        product(seqLen, seqLen, headDim, dHead + head, false, vh + head, true, dS);
        product(seqLen, headDim, seqLen, p, true, dHead + head, false, dVh + head);
        ops.softmax_causal_backward(dS, p, seqLen, scale);
        product(seqLen, headDim, seqLen, dS, false, kh + head, false, dQh + head);
        product(seqLen, headDim, seqLen, dS, true, qh + head, false, dKh + head);
      }
      store(dQh, dq, -1);
      store(dKh, dk, -1);
      store(dVh, dv, 0);
    },
  };
}

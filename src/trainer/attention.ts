// Causal multi-head self-attention with RoPE, forward and backward. The attention products stay in
// fp32 (only the linear layers' GEMMs are quantized); they run per (batch, head) through src/mx's gemm.
import { gemm } from '../mx/index.js';
import { ropePermute, softmaxCausal, softmaxCausalBackward } from './ops.js';

export interface AttentionShape {
  batch: number;
  seqLen: number;
  heads: number;
  headDim: number;
}

const ROPE_BASE = 10000;

export class CausalAttention {
  private readonly cos: Float32Array;
  private readonly sin: Float32Array;
  // Per-head tensors [batch, heads, seqLen, headDim] and probabilities [batch, heads, seqLen, seqLen].
  private readonly qh: Float32Array;
  private readonly kh: Float32Array;
  private readonly vh: Float32Array;
  private readonly probs: Float32Array;
  private readonly headOut: Float32Array;
  private readonly dHead: Float32Array;
  private readonly dKh: Float32Array;
  private readonly dVh: Float32Array;
  private readonly dScores: Float32Array;

  constructor(readonly shape: AttentionShape) {
    const { batch, seqLen, heads, headDim } = shape;
    const half = headDim / 2;
    this.cos = new Float32Array(seqLen * half);
    this.sin = new Float32Array(seqLen * half);
    for (let s = 0; s < seqLen; s++) {
      for (let i = 0; i < half; i++) {
        const angle = s * Math.pow(ROPE_BASE, (-2 * i) / headDim);
        this.cos[s * half + i] = Math.cos(angle);
        this.sin[s * half + i] = Math.sin(angle);
      }
    }
    const headSize = batch * heads * seqLen * headDim;
    this.qh = new Float32Array(headSize);
    this.kh = new Float32Array(headSize);
    this.vh = new Float32Array(headSize);
    this.headOut = new Float32Array(headSize);
    this.dHead = new Float32Array(headSize);
    this.dKh = new Float32Array(headSize);
    this.dVh = new Float32Array(headSize);
    this.probs = new Float32Array(batch * heads * seqLen * seqLen);
    this.dScores = new Float32Array(seqLen * seqLen);
  }

  /** out [tokens, dim] = attention(q, k, v), each [tokens, dim] with tokens = batch·seqLen. */
  forward(q: Float32Array, k: Float32Array, v: Float32Array, out: Float32Array): void {
    const { batch, seqLen, heads, headDim } = this.shape;
    this.splitHeads(q, this.qh, 1);
    this.splitHeads(k, this.kh, 1);
    this.splitHeads(v, this.vh, 0);
    const scale = 1 / Math.sqrt(headDim);
    const headSize = seqLen * headDim;
    const probSize = seqLen * seqLen;
    for (let bh = 0; bh < batch * heads; bh++) {
      const p = this.probs.subarray(bh * probSize, (bh + 1) * probSize);
      gemm(seqLen, seqLen, headDim, this.qh.subarray(bh * headSize, (bh + 1) * headSize), false, this.kh.subarray(bh * headSize, (bh + 1) * headSize), true, p);
      softmaxCausal(p, seqLen, scale);
      gemm(seqLen, headDim, seqLen, p, false, this.vh.subarray(bh * headSize, (bh + 1) * headSize), false, this.headOut.subarray(bh * headSize, (bh + 1) * headSize));
    }
    this.mergeHeads(this.headOut, out, 0);
  }

  /** Given ∂L/∂out, writes ∂L/∂q, ∂L/∂k, ∂L/∂v (each [tokens, dim]). Uses the last forward's state. */
  backward(dOut: Float32Array, dq: Float32Array, dk: Float32Array, dv: Float32Array): void {
    const { batch, seqLen, heads, headDim } = this.shape;
    const scale = 1 / Math.sqrt(headDim);
    const headSize = seqLen * headDim;
    const probSize = seqLen * seqLen;
    const dQh = this.headOut; // forward output no longer needed: reuse as ∂q per head
    const { dKh, dVh } = this;
    this.splitHeads(dOut, this.dHead, 0);
    const dS = this.dScores;
    for (let bh = 0; bh < batch * heads; bh++) {
      const at = (t: Float32Array) => t.subarray(bh * headSize, (bh + 1) * headSize);
      const p = this.probs.subarray(bh * probSize, (bh + 1) * probSize);
      gemm(seqLen, seqLen, headDim, at(this.dHead), false, at(this.vh), true, dS);
      gemm(seqLen, headDim, seqLen, p, true, at(this.dHead), false, at(dVh));
      softmaxCausalBackward(dS, p, seqLen, scale);
      gemm(seqLen, headDim, seqLen, dS, false, at(this.kh), false, at(dQh));
      gemm(seqLen, headDim, seqLen, dS, true, at(this.qh), false, at(dKh));
    }
    this.mergeHeads(dQh, dq, -1);
    this.mergeHeads(dKh, dk, -1);
    this.mergeHeads(dVh, dv, 0);
  }

  /** [tokens, dim] → [batch, heads, seqLen, headDim], rotating by RoPE when `rope` is 1. */
  private splitHeads(src: Float32Array, dst: Float32Array, rope: 0 | 1): void {
    ropePermute(src, dst, this.cos, this.sin, this.shape, rope, true);
  }

  /** [batch, heads, seqLen, headDim] → [tokens, dim], undoing RoPE (the transpose rotation) when `rope` is −1. */
  private mergeHeads(src: Float32Array, dst: Float32Array, rope: 0 | -1): void {
    ropePermute(src, dst, this.cos, this.sin, this.shape, rope, false);
  }

}

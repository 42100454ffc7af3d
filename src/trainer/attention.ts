// Causal multi-head self-attention with RoPE, forward and backward. The attention products stay in
// fp32 (only the linear layers' GEMMs are quantized); they run per (batch, head), all inside one
// WebAssembly memory where src/trainer/attention-wasm.ts loads, else through src/mx's gemm here.
import { gemm, mxBackendInUse } from '../mx/index.js';
import { loadAttentionKernel, type AttentionKernel } from './attention-wasm.js';
import { ropePermute, softmaxCausal, softmaxCausalBackward, trainerKernels } from './ops.js';

export interface AttentionShape {
  batch: number;
  seqLen: number;
  heads: number;
  headDim: number;
}

const ROPE_BASE = 10000;

/** The loop's per-head tensors [batch, heads, seqLen, headDim] and probabilities [batch, heads, seqLen, seqLen]. */
interface LoopBuffers {
  qh: Float32Array;
  kh: Float32Array;
  vh: Float32Array;
  probs: Float32Array;
  headOut: Float32Array;
  dHead: Float32Array;
  dKh: Float32Array;
  dVh: Float32Array;
  dScores: Float32Array;
}

export class CausalAttention {
  private readonly cos: Float32Array;
  private readonly sin: Float32Array;
  /** The WebAssembly pass (src/trainer/attention-wasm.ts), loaded on first use; undefined where it cannot run. */
  private kernel: AttentionKernel | undefined | null = null;
  /** Allocated only when the loop runs (without WebAssembly, or with src/mx's TypeScript kernels selected). */
  private buffers: LoopBuffers | undefined;
  /** The kernel the last forward ran on (undefined: the loop), which holds the state its backward needs. */
  private forwardKernel: AttentionKernel | undefined;

  constructor(
    readonly shape: AttentionShape,
    /** Where the WebAssembly pass comes from (tests pass one that declines, to run the loop). */
    private readonly loadKernel: typeof loadAttentionKernel = loadAttentionKernel,
  ) {
    const { seqLen, headDim } = shape;
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
  }

  /** The WebAssembly pass when the trainer's and src/mx's WebAssembly kernels are the ones selected (it runs both). */
  private selectedKernel(): AttentionKernel | undefined {
    if (trainerKernels() === undefined || mxBackendInUse() !== 'wasm') return undefined;
    if (this.kernel === null) this.kernel = this.loadKernel(this.shape, this.cos, this.sin);
    return this.kernel;
  }

  private loopBuffers(): LoopBuffers {
    if (this.buffers) return this.buffers;
    const { batch, seqLen, heads, headDim } = this.shape;
    const headSize = batch * heads * seqLen * headDim;
    const tensor = (): Float32Array => new Float32Array(headSize);
    this.buffers = {
      qh: tensor(), kh: tensor(), vh: tensor(), headOut: tensor(), dHead: tensor(), dKh: tensor(), dVh: tensor(),
      probs: new Float32Array(batch * heads * seqLen * seqLen),
      dScores: new Float32Array(seqLen * seqLen),
    };
    return this.buffers;
  }

  /** out [tokens, dim] = attention(q, k, v), each [tokens, dim] with tokens = batch·seqLen. */
  forward(q: Float32Array, k: Float32Array, v: Float32Array, out: Float32Array): void {
    this.forwardKernel = this.selectedKernel();
    if (this.forwardKernel) return this.forwardKernel.forward(q, k, v, out);
    const { batch, seqLen, heads, headDim } = this.shape;
    const { qh, kh, vh, probs, headOut } = this.loopBuffers();
    this.splitHeads(q, qh, 1);
    this.splitHeads(k, kh, 1);
    this.splitHeads(v, vh, 0);
    const scale = 1 / Math.sqrt(headDim);
    const headSize = seqLen * headDim;
    const probSize = seqLen * seqLen;
    for (let bh = 0; bh < batch * heads; bh++) {
      const p = probs.subarray(bh * probSize, (bh + 1) * probSize);
      gemm(seqLen, seqLen, headDim, qh.subarray(bh * headSize, (bh + 1) * headSize), false, kh.subarray(bh * headSize, (bh + 1) * headSize), true, p);
      softmaxCausal(p, seqLen, scale);
      gemm(seqLen, headDim, seqLen, p, false, vh.subarray(bh * headSize, (bh + 1) * headSize), false, headOut.subarray(bh * headSize, (bh + 1) * headSize));
    }
    this.mergeHeads(headOut, out, 0);
  }

  /** Given ∂L/∂out, writes ∂L/∂q, ∂L/∂k, ∂L/∂v (each [tokens, dim]). Uses the last forward's state. */
  backward(dOut: Float32Array, dq: Float32Array, dk: Float32Array, dv: Float32Array): void {
    if (this.forwardKernel) return this.forwardKernel.backward(dOut, dq, dk, dv);
    const { batch, seqLen, heads, headDim } = this.shape;
    const scale = 1 / Math.sqrt(headDim);
    const headSize = seqLen * headDim;
    const probSize = seqLen * seqLen;
    const { qh, kh, vh, probs, headOut, dHead, dKh, dVh, dScores: dS } = this.loopBuffers();
    const dQh = headOut; // forward output no longer needed: reuse as ∂q per head
    this.splitHeads(dOut, dHead, 0);
    for (let bh = 0; bh < batch * heads; bh++) {
      const at = (t: Float32Array) => t.subarray(bh * headSize, (bh + 1) * headSize);
      const p = probs.subarray(bh * probSize, (bh + 1) * probSize);
      gemm(seqLen, seqLen, headDim, at(dHead), false, at(vh), true, dS);
      gemm(seqLen, headDim, seqLen, p, true, at(dHead), false, at(dVh));
      softmaxCausalBackward(dS, p, seqLen, scale);
      gemm(seqLen, headDim, seqLen, dS, false, at(kh), false, at(dQh));
      gemm(seqLen, headDim, seqLen, dS, true, at(qh), false, at(dKh));
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

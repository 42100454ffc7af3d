/**
 * Drives the trainer's WebAssembly SIMD kernels (src/wasm/trainer-ops.wat): SwiGLU and the causal
 * softmax of attention (whose exp dominates them in plain JavaScript), RMSNorm, AdamW, transposes,
 * the cross-entropy's exponentials (float64, the same bits as the JavaScript loop) and attention's
 * RoPE head split / merge. Operands stream through the module's memory in cache-sized chunks of whole
 * rows, one batch element or one score matrix at a time.
 */
import { WASM_BASE64 } from '../wasm/generated/trainer-ops.js';
import { align16, tryLoad } from '../mx/wasm-arena.js';
import type { AttentionShape } from './attention.js';

interface ActivationExports {
  swiglu_forward(gate: number, up: number, out: number, sig: number, count: number): void;
  swiglu_backward(gate: number, up: number, sig: number, dOut: number, count: number): void;
  softmax_causal(p: number, seq: number, scale: number): void;
  softmax_causal_backward(dS: number, p: number, seq: number, scale: number): void;
  add(a: number, b: number, out: number, count: number): void;
  rms_norm_forward(x: number, gain: number, rows: number, cols: number, y: number, rstd: number, eps: number): void;
  rms_norm_backward(x: number, gain: number, rstd: number, dy: number, rows: number, cols: number, dx: number, dGain: number, accumulate: number): void;
  transpose(src: number, rows: number, cols: number, dst: number): void;
  softmax_rows(logits: number, rows: number, vocab: number, probs: number, stats: number, totalRows: number, withGrad: number, scratch: number): void;
  exp64(at: number, count: number): void;
  rope_permute(src: number, dst: number, cos: number, sin: number, seqLen: number, heads: number, headDim: number, rope: number, split: number): void;
  adamw(data: number, grad: number, m: number, v: number, count: number, gradScale: number, beta1: number, beta2: number, c1: number, c2: number, lr: number, eps: number, decay: number): void;
}

/** One AdamW update of one parameter tensor (see src/trainer/optimizer.ts). */
export interface AdamWUpdate {
  data: Float32Array;
  grad: Float32Array;
  m: Float32Array;
  v: Float32Array;
  gradScale: number;
  beta1: number;
  beta2: number;
  /** Bias corrections 1 − β^t. */
  correction1: number;
  correction2: number;
  lr: number;
  eps: number;
  /** lr · weight decay, or 0. */
  decay: number;
}

export interface TrainerKernels {
  /** Also keeps sigmoid(gate) in sig for swigluBackward. */
  swigluForward(gate: Float32Array, up: Float32Array, out: Float32Array, sig: Float32Array): void;
  /** sig: what swigluForward kept for this gate. */
  swigluBackward(gate: Float32Array, up: Float32Array, sig: Float32Array, dOut: Float32Array, dGate: Float32Array, dUp: Float32Array): void;
  /** False when it cannot take this shape (seq not a multiple of 4): the caller runs its own loop. */
  softmaxCausal(p: Float32Array, seq: number, scale: number): boolean;
  softmaxCausalBackward(dS: Float32Array, p: Float32Array, seq: number, scale: number): boolean;
  /** False when cols is not a multiple of 4. With `sumOf`, x is first set to sumOf[0] + sumOf[1] (a residual connection). */
  rmsNormForward(x: Float32Array, gain: Float32Array, rows: number, cols: number, y: Float32Array, rstd: Float32Array, eps: number, sumOf?: [Float32Array, Float32Array]): boolean;
  rmsNormBackward(x: Float32Array, gain: Float32Array, rstd: Float32Array, dy: Float32Array, rows: number, cols: number, dx: Float32Array, dGain: Float32Array, accumulate: boolean): boolean;
  adamW(update: AdamWUpdate): void;
  /** False unless rows and cols are multiples of 4. */
  transpose(src: Float32Array, rows: number, cols: number, dst: Float32Array): boolean;
  /**
   * The float64 part of the cross-entropy (src/trainer/ops.ts), bit for bit: per row its largest logit
   * into rowMax, Σ exp(logit − max) into rowSum and, with dLogits, exp(logit − max)/(sum·rows) into
   * dLogits. False when vocab is not a multiple of 4.
   */
  softmaxRows(logits: Float32Array, rows: number, vocab: number, dLogits: Float32Array | undefined, rowMax: Float64Array, rowSum: Float64Array): boolean;
  /** Math.exp of every value in place, bit for bit (what softmaxRows uses). */
  exp64(values: Float64Array): void;
  /** Attention's head split / merge with RoPE (src/trainer/ops.ts), bit for bit. False when headDim is not a multiple of 4. */
  ropePermute(src: Float32Array, dst: Float32Array, cos: Float32Array, sin: Float32Array, shape: AttentionShape, rope: -1 | 0 | 1, split: boolean): boolean;
}

const CHUNK = 4096; // floats per operand per call: three operands stay within L1/L2
const A = 0;
const B = A + 4 * CHUNK;
const C = B + 4 * CHUNK;
const D = C + 4 * CHUNK; // a fourth operand: AdamW's v, SwiGLU's sigmoid
const END = D + 4 * CHUNK;

/** Calls `each` on consecutive chunks of `count` floats; the kernels see the tail rounded up to whole vectors. */
function forEachChunk(count: number, each: (offset: number, length: number, vectorFloats: number) => void): void {
  for (let offset = 0; offset < count; offset += CHUNK) {
    const length = Math.min(CHUNK, count - offset);
    each(offset, length, align16(4 * length) >> 2);
  }
}

export function loadTrainerKernels(): TrainerKernels | undefined {
  const arena = tryLoad<ActivationExports>(WASM_BASE64);
  if (!arena) return undefined;
  arena.ensure(END);
  const kernels = arena.exports;
  return {
    swigluForward(gate, up, out, sig) {
      forEachChunk(out.length, (offset, length, floats) => {
        const memory = arena.f32;
        memory.set(gate.subarray(offset, offset + length), A >> 2);
        memory.set(up.subarray(offset, offset + length), B >> 2);
        kernels.swiglu_forward(A, B, C, D, floats);
        out.set(memory.subarray(C >> 2, (C >> 2) + length), offset);
        sig.set(memory.subarray(D >> 2, (D >> 2) + length), offset);
      });
    },
    swigluBackward(gate, up, sig, dOut, dGate, dUp) {
      forEachChunk(dOut.length, (offset, length, floats) => {
        const memory = arena.f32;
        memory.set(gate.subarray(offset, offset + length), A >> 2);
        memory.set(up.subarray(offset, offset + length), B >> 2);
        memory.set(sig.subarray(offset, offset + length), D >> 2);
        memory.set(dOut.subarray(offset, offset + length), C >> 2);
        kernels.swiglu_backward(A, B, D, C, floats);
        dGate.set(memory.subarray(A >> 2, (A >> 2) + length), offset);
        dUp.set(memory.subarray(B >> 2, (B >> 2) + length), offset);
      });
    },
    softmaxCausal(p, seq, scale) {
      if (seq % 4 !== 0) return false;
      const size = seq * seq;
      arena.ensure(4 * size);
      arena.f32.set(p.subarray(0, size), 0);
      kernels.softmax_causal(0, seq, scale);
      p.set(arena.f32.subarray(0, size));
      return true;
    },
    softmaxCausalBackward(dS, p, seq, scale) {
      if (seq % 4 !== 0) return false;
      const size = seq * seq;
      arena.ensure(8 * size);
      const memory = arena.f32;
      memory.set(dS.subarray(0, size), 0);
      memory.set(p.subarray(0, size), size);
      kernels.softmax_causal_backward(0, 4 * size, seq, scale);
      dS.set(memory.subarray(0, size));
      return true;
    },
    rmsNormForward(x, gain, rows, cols, y, rstd, eps, sumOf) {
      if (cols % 4 !== 0) return false;
      // The gain, then per chunk of whole rows their 1/rms, x, y and the two terms of x when it is a sum.
      const rowsPerChunk = Math.max(1, Math.floor(CHUNK / cols));
      const chunkBytes = 4 * rowsPerChunk * cols;
      const rstdAt = align16(4 * cols);
      const xAt = align16(rstdAt + 4 * rowsPerChunk);
      const yAt = align16(xAt + chunkBytes);
      const [aAt, bAt] = [align16(yAt + chunkBytes), align16(yAt + 2 * chunkBytes)];
      arena.ensure(bAt + chunkBytes);
      const memory = arena.f32;
      memory.set(gain.subarray(0, cols), 0);
      for (let row = 0; row < rows; row += rowsPerChunk) {
        const count = Math.min(rowsPerChunk, rows - row);
        const [from, to] = [row * cols, (row + count) * cols];
        if (sumOf) {
          memory.set(sumOf[0].subarray(from, to), aAt >> 2);
          memory.set(sumOf[1].subarray(from, to), bAt >> 2);
          kernels.add(aAt, bAt, xAt, count * cols);
          x.set(memory.subarray(xAt >> 2, (xAt >> 2) + count * cols), from);
        } else memory.set(x.subarray(from, to), xAt >> 2);
        kernels.rms_norm_forward(xAt, 0, count, cols, yAt, rstdAt, eps);
        y.set(memory.subarray(yAt >> 2, (yAt >> 2) + count * cols), from);
        rstd.set(memory.subarray(rstdAt >> 2, (rstdAt >> 2) + count), row);
      }
      return true;
    },
    rmsNormBackward(x, gain, rstd, dy, rows, cols, dx, dGain, accumulate) {
      if (cols % 4 !== 0) return false;
      const rowsPerChunk = Math.max(1, Math.floor(CHUNK / cols));
      const dGainAt = align16(4 * cols);
      const rstdAt = align16(dGainAt + 4 * cols);
      const xAt = align16(rstdAt + 4 * rowsPerChunk);
      const dyAt = align16(xAt + 4 * rowsPerChunk * cols);
      const dxAt = align16(dyAt + 4 * rowsPerChunk * cols);
      arena.ensure(dxAt + 4 * rowsPerChunk * cols);
      const memory = arena.f32;
      memory.set(gain.subarray(0, cols), 0);
      memory.set(dGain.subarray(0, cols), dGainAt >> 2);
      for (let row = 0; row < rows; row += rowsPerChunk) {
        const count = Math.min(rowsPerChunk, rows - row);
        const [from, to] = [row * cols, (row + count) * cols];
        memory.set(x.subarray(from, to), xAt >> 2);
        memory.set(dy.subarray(from, to), dyAt >> 2);
        memory.set(rstd.subarray(row, row + count), rstdAt >> 2);
        if (accumulate) memory.set(dx.subarray(from, to), dxAt >> 2);
        kernels.rms_norm_backward(xAt, 0, rstdAt, dyAt, count, cols, dxAt, dGainAt, accumulate ? 1 : 0);
        dx.set(memory.subarray(dxAt >> 2, (dxAt >> 2) + count * cols), from);
      }
      dGain.set(memory.subarray(dGainAt >> 2, (dGainAt >> 2) + cols));
      return true;
    },
    transpose(src, rows, cols, dst) {
      if (rows % 4 !== 0 || cols % 4 !== 0) return false;
      const count = rows * cols;
      const out = align16(4 * count);
      arena.ensure(2 * out);
      const memory = arena.f32;
      memory.set(src.subarray(0, count), 0);
      kernels.transpose(0, rows, cols, out);
      dst.set(memory.subarray(out >> 2, (out >> 2) + count));
      return true;
    },
    softmaxRows(logits, rows, vocab, dLogits, rowMax, rowSum) {
      if (vocab % 4 !== 0) return false;
      // Per chunk of whole rows: their logits, their gradients and (max, sum) per row; then one row of doubles.
      const rowsPerChunk = Math.max(1, Math.floor(CHUNK / vocab));
      const chunkBytes = 4 * rowsPerChunk * vocab;
      const [logitsAt, probsAt] = [0, chunkBytes];
      const statsAt = 2 * chunkBytes;
      const scratchAt = statsAt + 16 * rowsPerChunk;
      arena.ensure(scratchAt + 8 * vocab);
      const memory = arena.f32;
      const stats = new Float64Array(arena.buffer, statsAt, 2 * rowsPerChunk);
      for (let row = 0; row < rows; row += rowsPerChunk) {
        const count = Math.min(rowsPerChunk, rows - row);
        const [from, to] = [row * vocab, (row + count) * vocab];
        memory.set(logits.subarray(from, to), logitsAt >> 2);
        kernels.softmax_rows(logitsAt, count, vocab, probsAt, statsAt, rows, dLogits ? 1 : 0, scratchAt);
        dLogits?.set(memory.subarray(probsAt >> 2, (probsAt >> 2) + count * vocab), from);
        for (let r = 0; r < count; r++) {
          rowMax[row + r] = stats[2 * r]!;
          rowSum[row + r] = stats[2 * r + 1]!;
        }
      }
      return true;
    },
    exp64(values) {
      // Two doubles per vector: an odd count gets one padding value, whose exp is not read.
      const padded = values.length + (values.length % 2);
      arena.ensure(8 * padded);
      const memory = new Float64Array(arena.buffer, 0, padded);
      memory.set(values);
      if (padded > values.length) memory[values.length] = 0;
      kernels.exp64(0, padded);
      values.set(memory.subarray(0, values.length));
    },
    ropePermute(src, dst, cos, sin, { batch, seqLen, heads, headDim }, rope, split) {
      if (headDim % 4 !== 0) return false;
      // One batch element at a time (the same span in both layouts): the tables, then its source and destination.
      const perBatch = seqLen * heads * headDim;
      const tableFloats = seqLen * (headDim / 2);
      const sinAt = align16(4 * tableFloats);
      const srcAt = align16(sinAt + 4 * tableFloats);
      const dstAt = align16(srcAt + 4 * perBatch);
      arena.ensure(dstAt + 4 * perBatch);
      const memory = arena.f32;
      memory.set(cos.subarray(0, tableFloats), 0);
      memory.set(sin.subarray(0, tableFloats), sinAt >> 2);
      for (let b = 0; b < batch; b++) {
        const [from, to] = [b * perBatch, (b + 1) * perBatch];
        memory.set(src.subarray(from, to), srcAt >> 2);
        kernels.rope_permute(srcAt, dstAt, 0, sinAt, seqLen, heads, headDim, rope, split ? 1 : 0);
        dst.set(memory.subarray(dstAt >> 2, (dstAt >> 2) + perBatch), from);
      }
      return true;
    },
    adamW(u) {
      forEachChunk(u.data.length, (offset, length, floats) => {
        const memory = arena.f32;
        const end = offset + length;
        memory.set(u.data.subarray(offset, end), A >> 2);
        memory.set(u.grad.subarray(offset, end), B >> 2);
        memory.set(u.m.subarray(offset, end), C >> 2);
        memory.set(u.v.subarray(offset, end), D >> 2);
        kernels.adamw(A, B, C, D, floats, u.gradScale, u.beta1, u.beta2, u.correction1, u.correction2, u.lr, u.eps, u.decay);
        u.data.set(memory.subarray(A >> 2, (A >> 2) + length), offset);
        u.m.set(memory.subarray(C >> 2, (C >> 2) + length), offset);
        u.v.set(memory.subarray(D >> 2, (D >> 2) + length), offset);
      });
    },
  };
}

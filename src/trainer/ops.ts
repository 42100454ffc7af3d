// Element-wise and row-wise pieces of the Llama block with their hand-written backward passes.
// Activations are row-major [tokens, features] Float32Arrays. SwiGLU, the causal softmax, RMSNorm,
// operand transposes, attention's RoPE head permutes and the cross-entropy's exponentials run as
// WebAssembly SIMD kernels where they load (src/trainer/ops-wasm.ts); the loops here are the fallback
// and the reference the kernels are tested against (the last two bit for bit).
import type { AttentionShape } from './attention.js';
import { loadTrainerKernels, type TrainerKernels } from './ops-wasm.js';

let kernels: TrainerKernels | undefined = loadTrainerKernels();

/** The WebAssembly kernels in use, if any (the optimizer's AdamW update runs there too). */
export function trainerKernels(): TrainerKernels | undefined {
  return kernels;
}

/** Switches the trainer's kernels between WebAssembly (when it loads) and the loops below; returns whether WebAssembly is in use. */
export function useWasmTrainerKernels(enabled: boolean): boolean {
  kernels = enabled ? loadTrainerKernels() : undefined;
  return kernels !== undefined;
}

const TILE = 32;

/** dst[c·rows + r] = src[r·cols + c]: puts the former row axis last. Tiled to stay in cache. */
export function transpose(src: Float32Array, rows: number, cols: number, dst: Float32Array): Float32Array {
  if (kernels?.transpose(src, rows, cols, dst)) return dst;
  for (let r0 = 0; r0 < rows; r0 += TILE) {
    const r1 = Math.min(rows, r0 + TILE);
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const c1 = Math.min(cols, c0 + TILE);
      for (let r = r0; r < r1; r++) {
        const base = r * cols;
        for (let c = c0; c < c1; c++) dst[c * rows + r] = src[base + c]!;
      }
    }
  }
  return dst;
}

const RMS_EPS = 1e-6;

/** y = x / rms(x) · gain, per row; keeps 1/rms per row in `rstd` for the backward pass. */
export function rmsNormForward(x: Float32Array, gain: Float32Array, rows: number, cols: number, y: Float32Array, rstd: Float32Array): void {
  if (kernels?.rmsNormForward(x, gain, rows, cols, y, rstd, RMS_EPS)) return;
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let sumSq = 0;
    for (let c = 0; c < cols; c++) sumSq += x[base + c]! * x[base + c]!;
    const inv = 1 / Math.sqrt(sumSq / cols + RMS_EPS);
    rstd[r] = inv;
    for (let c = 0; c < cols; c++) y[base + c] = x[base + c]! * inv * gain[c]!;
  }
}

/** A residual connection then RMSNorm: sum = a + b, then rmsNormForward(sum) (one pass through the kernel). */
export function residualRmsNormForward(a: Float32Array, b: Float32Array, sum: Float32Array, gain: Float32Array, rows: number, cols: number, y: Float32Array, rstd: Float32Array): void {
  if (kernels?.rmsNormForward(sum, gain, rows, cols, y, rstd, RMS_EPS, [a, b])) return;
  for (let i = 0; i < rows * cols; i++) sum[i] = a[i]! + b[i]!;
  rmsNormForward(sum, gain, rows, cols, y, rstd);
}

/** dx (+)= ∂L/∂x and dGain += ∂L/∂gain of rmsNormForward. */
export function rmsNormBackward(
  x: Float32Array,
  gain: Float32Array,
  rstd: Float32Array,
  dy: Float32Array,
  rows: number,
  cols: number,
  dx: Float32Array,
  dGain: Float32Array,
  accumulate: boolean,
): void {
  if (kernels?.rmsNormBackward(x, gain, rstd, dy, rows, cols, dx, dGain, accumulate)) return;
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    const inv = rstd[r]!;
    let dot = 0;
    for (let c = 0; c < cols; c++) {
      dot += dy[base + c]! * gain[c]! * x[base + c]!;
      dGain[c] = dGain[c]! + dy[base + c]! * x[base + c]! * inv;
    }
    const coef = (dot * inv * inv * inv) / cols;
    for (let c = 0; c < cols; c++) {
      const g = dy[base + c]! * gain[c]! * inv - x[base + c]! * coef;
      dx[base + c] = accumulate ? dx[base + c]! + g : g;
    }
  }
}

function sigmoid(a: number): number {
  return 1 / (1 + Math.exp(-a));
}

/** SwiGLU: out = silu(gate) · up; sig receives sigmoid(gate) for swigluBackward (the kernel's, which it reuses). */
export function swigluForward(gate: Float32Array, up: Float32Array, out: Float32Array, sig: Float32Array): void {
  if (kernels) return kernels.swigluForward(gate, up, out, sig);
  for (let i = 0; i < out.length; i++) {
    const a = gate[i]!;
    const s = sigmoid(a);
    sig[i] = s;
    out[i] = a * s * up[i]!;
  }
}

/**
 * Backward of swigluForward given what it left in sig. The loop computes sigmoid again in float64
 * (sig holds it rounded to float32); the kernel's float32 sigmoid is exactly what it stored.
 */
export function swigluBackward(gate: Float32Array, up: Float32Array, sig: Float32Array, dOut: Float32Array, dGate: Float32Array, dUp: Float32Array): void {
  if (kernels) return kernels.swigluBackward(gate, up, sig, dOut, dGate, dUp);
  for (let i = 0; i < dOut.length; i++) {
    const a = gate[i]!;
    const s = sigmoid(a);
    const silu = a * s;
    dUp[i] = dOut[i]! * silu;
    dGate[i] = dOut[i]! * up[i]! * s * (1 + a * (1 - s));
  }
}

/** In place on a [seq × seq] score matrix: row i := softmax(scale · row[0..i]), zeros after. */
export function softmaxCausal(p: Float32Array, seq: number, scale: number): void {
  if (kernels?.softmaxCausal(p, seq, scale)) return;
  for (let i = 0; i < seq; i++) {
    const row = i * seq;
    let max = -Infinity;
    for (let j = 0; j <= i; j++) max = Math.max(max, p[row + j]! * scale);
    let sum = 0;
    for (let j = 0; j <= i; j++) {
      const e = Math.exp(p[row + j]! * scale - max);
      p[row + j] = e;
      sum += e;
    }
    for (let j = 0; j <= i; j++) p[row + j] = p[row + j]! / sum;
    for (let j = i + 1; j < seq; j++) p[row + j] = 0;
  }
}

/** In place: dS := ∂L/∂scores of softmaxCausal given ∂L/∂p in dS and the probabilities p. */
export function softmaxCausalBackward(dS: Float32Array, p: Float32Array, seq: number, scale: number): void {
  if (kernels?.softmaxCausalBackward(dS, p, seq, scale)) return;
  for (let i = 0; i < seq; i++) {
    const row = i * seq;
    let dot = 0;
    for (let j = 0; j <= i; j++) dot += dS[row + j]! * p[row + j]!;
    for (let j = 0; j <= i; j++) dS[row + j] = p[row + j]! * (dS[row + j]! - dot) * scale;
    for (let j = i + 1; j < seq; j++) dS[row + j] = 0;
  }
}

/**
 * Attention's head split (`split`: [tokens, dim] → [batch, heads, seqLen, headDim]) or merge (the
 * reverse), rotating each head's pairs (x[i], x[i + headDim/2]) by RoPE: the angle's cos and sin
 * tables are [seqLen, headDim/2]; `rope` 1 rotates, −1 undoes the rotation, 0 only moves.
 */
export function ropePermute(src: Float32Array, dst: Float32Array, cos: Float32Array, sin: Float32Array, shape: AttentionShape, rope: -1 | 0 | 1, split: boolean): void {
  if (kernels?.ropePermute(src, dst, cos, sin, shape, rope, split)) return;
  const { batch, seqLen, heads, headDim } = shape;
  const half = headDim / 2;
  const dim = heads * headDim;
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      for (let s = 0; s < seqLen; s++) {
        const tokenBase = (b * seqLen + s) * dim + h * headDim;
        const headBase = ((b * heads + h) * seqLen + s) * headDim;
        const from = split ? tokenBase : headBase;
        const to = split ? headBase : tokenBase;
        for (let i = 0; i < half; i++) {
          const x1 = src[from + i]!;
          const x2 = src[from + i + half]!;
          const c = rope === 0 ? 1 : cos[s * half + i]!;
          const sn = rope * (rope === 0 ? 0 : sin[s * half + i]!);
          dst[to + i] = x1 * c - x2 * sn;
          dst[to + i + half] = x1 * sn + x2 * c;
        }
      }
    }
  }
}

/** Per-row maxima and sums of exponentials of crossEntropy, grown to the largest batch seen. */
let rowMax = new Float64Array(0);
let rowSum = new Float64Array(0);

/**
 * Mean cross-entropy of `logits` [rows, vocab] against `targets`; writes ∂loss/∂logits into dLogits.
 * Accumulates in float64 so the loss itself is reproducible to the last bit; the WebAssembly kernel
 * does the exponentials with the same float64 exp as Math.exp, so it gives the same bits.
 */
export function crossEntropy(logits: Float32Array, targets: Uint8Array, rows: number, vocab: number, dLogits: Float32Array | undefined): number {
  if (rowMax.length < rows) [rowMax, rowSum] = [new Float64Array(rows), new Float64Array(rows)];
  if (!kernels?.softmaxRows(logits, rows, vocab, dLogits, rowMax, rowSum)) softmaxRows(logits, rows, vocab, dLogits);
  let total = 0;
  for (let r = 0; r < rows; r++) {
    const target = r * vocab + targets[r]!;
    total += Math.log(rowSum[r]!) + rowMax[r]! - logits[target]!;
    if (dLogits !== undefined) dLogits[target] = dLogits[target]! - 1 / rows;
  }
  return total / rows;
}

/** crossEntropy's row maxima, sums of exp(logit − max) and, with dLogits, exp(logit − max)/(sum·rows). */
function softmaxRows(logits: Float32Array, rows: number, vocab: number, dLogits: Float32Array | undefined): void {
  for (let r = 0; r < rows; r++) {
    const base = r * vocab;
    let max = -Infinity;
    for (let c = 0; c < vocab; c++) max = Math.max(max, logits[base + c]!);
    let sum = 0;
    for (let c = 0; c < vocab; c++) {
      const e = Math.exp(logits[base + c]! - max);
      if (dLogits !== undefined) dLogits[base + c] = e;
      sum += e;
    }
    rowMax[r] = max;
    rowSum[r] = sum;
    if (dLogits !== undefined) {
      const scale = 1 / (sum * rows);
      for (let c = 0; c < vocab; c++) dLogits[base + c] = dLogits[base + c]! * scale;
    }
  }
}

/**
 * Runs the trainer's WebAssembly kernels a few rounds on small inputs so V8's optimizing tier has
 * them before the first training step (see src/mx/warm-up.ts). Returns the milliseconds it took.
 */
export function warmUpTrainerKernels(): number {
  const started = performance.now();
  const adamW = kernels?.adamW;
  const [rows, cols, seq] = [64, 64, 64];
  const a = Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i));
  const b = Float32Array.from(a, (x) => x * 0.5);
  const [c, d] = [new Float32Array(a.length), new Float32Array(a.length)];
  const rstd = new Float32Array(rows);
  const gain = new Float32Array(cols).fill(1);
  const targets = new Uint8Array(rows);
  const tables = a.subarray(0, seq * 8);
  const heads = { batch: 1, seqLen: seq, heads: 4, headDim: 16 };
  for (let round = 0; round < 12; round++) {
    transpose(a, rows, cols, c);
    swigluForward(a, b, c, d);
    swigluBackward(a, b, d, c, d, c);
    softmaxCausal(c, seq, 0.25);
    softmaxCausalBackward(d, c, seq, 0.25);
    rmsNormForward(a, gain, rows, cols, c, rstd);
    rmsNormBackward(a, gain, rstd, b, rows, cols, d, new Float32Array(cols), round % 2 === 0);
    crossEntropy(a, targets, rows, cols, c);
    ropePermute(a, c, tables, tables, heads, round % 2 === 0 ? 1 : -1, round % 2 === 0);
    adamW?.({ data: c, grad: a, m: b.slice(), v: d.fill(1), gradScale: 1, beta1: 0.9, beta2: 0.95, correction1: 0.1, correction2: 0.05, lr: 1e-3, eps: 1e-8, decay: 0 });
  }
  return performance.now() - started;
}

// A Llama-style decoder with a hand-written backward pass: token embedding; per block RMSNorm →
// causal attention with RoPE → residual, RMSNorm → SwiGLU MLP → residual; final RMSNorm; LM head.
import { Rng } from '../mx/index.js';
import { GEMM_KINDS, gemmRecipeProblems, type GemmKind, type RunConfig } from '../protocol/config.js';
import type { LayerInfo } from '../protocol/telemetry.js';
import { CausalAttention } from './attention.js';
import { Linear, type GemmStep } from './linear.js';
import { operandSlots } from './operand.js';
import { crossEntropy, residualRmsNormForward, rmsNormBackward, rmsNormForward, swigluBackward, swigluForward } from './ops.js';
import { createParam, fillNormal, type Param } from './params.js';

export interface ModelShape {
  vocab: number;
  dim: number;
  layers: number;
  heads: number;
  hidden: number;
  seqLen: number;
  batch: number;
}

const INIT_STD = 0.02;
// Distinct streams derived from the run seed, so adding telemetry never shifts the weights' init.
export const SEED_STREAMS = { init: 0x1, sketch: 0x2, train: 0x3, stats: 0x4, data: 0x5, eval: 0x6, rotation: 0x10 } as const;

export function streamSeed(seed: number, stream: number): number {
  return (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(stream, 0x85ebca77)) >>> 0;
}

/** Reads and checks the model shape from a run config; errors name the field to fix. */
export function modelShape(config: RunConfig): ModelShape {
  const read = (key: keyof ModelShape): number => {
    const value = config.model[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw new Error(`config.model.${key} must be a positive integer, got ${JSON.stringify(value)}`);
    return value;
  };
  const shape: ModelShape = { vocab: read('vocab'), dim: read('dim'), layers: read('layers'), heads: read('heads'), hidden: read('hidden'), seqLen: read('seqLen'), batch: read('batch') };
  if (shape.vocab !== 256) throw new Error(`config.model.vocab must be 256 (the trainer's vocabulary is bytes), got ${shape.vocab}`);
  if (shape.dim % shape.heads !== 0 || (shape.dim / shape.heads) % 2 !== 0) throw new Error(`config.model.dim (${shape.dim}) must split into heads (${shape.heads}) of even size for RoPE`);
  const tokens = shape.batch * shape.seqLen;
  // Each GEMM's reduction dimensions: Fprop over in-features, Dgrad over out-features, Wgrad over tokens.
  const reductions: Record<GemmKind, Record<string, number>> = {
    fprop: { dim: shape.dim, hidden: shape.hidden },
    dgrad: { dim: shape.dim, hidden: shape.hidden, vocab: shape.vocab },
    wgrad: { 'batch·seqLen': tokens },
  };
  // Format blocks must divide every reduction dimension (checked at every precision: layer stats measure
  // MXFP4 or the GEMM's block format regardless). A Hadamard block that does not is not an error: both
  // operands are zero-padded to its next multiple (src/trainer/linear.ts), runStarted reports "padded".
  const problems = GEMM_KINDS.flatMap((kind) => gemmRecipeProblems(kind, config.gemms[kind], reductions[kind]));
  if (problems.length > 0) throw new Error(`config.gemms cannot run: ${problems.join('; ')}`);
  return shape;
}

interface Block {
  norm1: Param;
  norm2: Param;
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  gate: Linear;
  up: Linear;
  down: Linear;
  attention: CausalAttention;
  // Forward state kept for the backward pass.
  input: Float32Array;
  normed1: Float32Array;
  rstd1: Float32Array;
  attended: Float32Array;
  mid: Float32Array;
  normed2: Float32Array;
  rstd2: Float32Array;
  activated: Float32Array;
  /** sigmoid(gate), from SwiGLU's forward for its backward. */
  gateSigmoid: Float32Array;
}

function sketchIndices(size: number, count: number, rng: Rng): number[] {
  const chosen = new Set<number>();
  const wanted = Math.min(count, size);
  while (chosen.size < wanted) chosen.add(rng.nextU32() % size);
  return [...chosen].sort((a, b) => a - b);
}

export class LlamaModel {
  readonly params: Param[] = [];
  readonly linears: Linear[] = [];
  readonly tokens: number;
  private readonly embedding: Param;
  private readonly finalNorm: Param;
  private readonly head: Linear;
  private readonly blocks: Block[] = [];
  private readonly residual: Float32Array[];
  private readonly finalNormed: Float32Array;
  private readonly finalRstd: Float32Array;
  private readonly dLogits: Float32Array;
  private readonly scratch: { dh: Float32Array; dNormed: Float32Array; dAttended: Float32Array; dq: Float32Array; dk: Float32Array; dv: Float32Array; dActivated: Float32Array; dGate: Float32Array; dUp: Float32Array };
  private inputTokens: Uint8Array = new Uint8Array(0);

  constructor(
    readonly shape: ModelShape,
    seed: number,
    sketchSize: number,
  ) {
    const { vocab, dim, hidden, layers, batch, seqLen, heads } = shape;
    const T = (this.tokens = batch * seqLen);
    const initRng = new Rng(streamSeed(seed, SEED_STREAMS.init));
    const sketchRng = new Rng(streamSeed(seed, SEED_STREAMS.sketch));
    const residualStd = INIT_STD / Math.sqrt(2 * layers);
    const slots = operandSlots();
    const linear = (name: string, kind: string, block: number, outFeatures: number, inFeatures: number, std: number): Linear => {
      const weight = createParam(`${name}.weight`, [outFeatures, inFeatures], true);
      fillNormal(weight.data, std, initRng);
      this.params.push(weight);
      const info = { name, kind, block, outFeatures, inFeatures, sketchIndices: sketchIndices(outFeatures * inFeatures, sketchSize, sketchRng) };
      const layer = new Linear(info, weight, T, slots);
      this.linears.push(layer);
      return layer;
    };
    const gain = (name: string, size: number): Param => {
      const param = createParam(name, [size], false);
      param.data.fill(1);
      this.params.push(param);
      return param;
    };
    this.embedding = createParam('embedding.weight', [vocab, dim], true);
    fillNormal(this.embedding.data, INIT_STD, initRng);
    this.params.push(this.embedding);
    for (let b = 0; b < layers; b++) {
      const p = `blocks.${b}`;
      this.blocks.push({
        norm1: gain(`${p}.attn_norm.weight`, dim),
        q: linear(`${p}.attn.q`, 'q', b, dim, dim, INIT_STD),
        k: linear(`${p}.attn.k`, 'k', b, dim, dim, INIT_STD),
        v: linear(`${p}.attn.v`, 'v', b, dim, dim, INIT_STD),
        o: linear(`${p}.attn.o`, 'o', b, dim, dim, residualStd),
        norm2: gain(`${p}.mlp_norm.weight`, dim),
        gate: linear(`${p}.mlp.gate`, 'gate', b, hidden, dim, INIT_STD),
        up: linear(`${p}.mlp.up`, 'up', b, hidden, dim, INIT_STD),
        down: linear(`${p}.mlp.down`, 'down', b, dim, hidden, residualStd),
        attention: new CausalAttention({ batch, seqLen, heads, headDim: dim / heads }),
        input: new Float32Array(0),
        normed1: new Float32Array(T * dim),
        rstd1: new Float32Array(T),
        attended: new Float32Array(T * dim),
        mid: new Float32Array(T * dim),
        normed2: new Float32Array(T * dim),
        rstd2: new Float32Array(T),
        activated: new Float32Array(T * hidden),
        gateSigmoid: new Float32Array(T * hidden),
      });
    }
    this.finalNorm = gain('final_norm.weight', dim);
    this.head = linear('lm_head', 'lm_head', -1, vocab, dim, INIT_STD);
    this.residual = Array.from({ length: layers + 1 }, () => new Float32Array(T * dim));
    this.finalNormed = new Float32Array(T * dim);
    this.finalRstd = new Float32Array(T);
    this.dLogits = new Float32Array(T * vocab);
    this.scratch = {
      dh: new Float32Array(T * dim),
      dNormed: new Float32Array(T * dim),
      dAttended: new Float32Array(T * dim),
      dq: new Float32Array(T * dim),
      dk: new Float32Array(T * dim),
      dv: new Float32Array(T * dim),
      dActivated: new Float32Array(T * hidden),
      dGate: new Float32Array(T * hidden),
      dUp: new Float32Array(T * hidden),
    };
  }

  layerInfos(): LayerInfo[] {
    return this.linears.map((layer) => layer.info);
  }

  /** Mean next-byte cross-entropy of `inputs` → `targets` (each batch·seqLen bytes). */
  loss(inputs: Uint8Array, targets: Uint8Array, step: GemmStep): number {
    return crossEntropy(this.forward(inputs, step), targets, this.tokens, this.shape.vocab, undefined);
  }

  /** Loss, with every param.grad set to its gradient. */
  lossAndGrad(inputs: Uint8Array, targets: Uint8Array, step: GemmStep): number {
    const logits = this.forward(inputs, step);
    const loss = crossEntropy(logits, targets, this.tokens, this.shape.vocab, this.dLogits);
    this.backward(step);
    return loss;
  }

  private forward(inputs: Uint8Array, step: GemmStep): Float32Array {
    const { dim } = this.shape;
    const T = this.tokens;
    if (inputs.length !== T) throw new Error(`model expects ${T} input tokens per step, got ${inputs.length}`);
    this.inputTokens = inputs;
    const h0 = this.residual[0]!;
    for (let t = 0; t < T; t++) h0.set(this.embedding.data.subarray(inputs[t]! * dim, (inputs[t]! + 1) * dim), t * dim);
    // Each residual sum runs together with the RMSNorm that reads it: block b's first one, or the final one.
    const normOf = (b: number) => {
      const block = this.blocks[b];
      return block ? ([block.norm1.data, block.normed1, block.rstd1] as const) : ([this.finalNorm.data, this.finalNormed, this.finalRstd] as const);
    };
    const [gain0, normed0, rstd0] = normOf(0);
    rmsNormForward(h0, gain0, T, dim, normed0, rstd0);
    this.blocks.forEach((block, b) => {
      block.input = this.residual[b]!;
      const q = block.q.forward(block.normed1, step);
      const k = block.k.forward(block.normed1, step);
      const v = block.v.forward(block.normed1, step);
      block.attention.forward(q, k, v, block.attended);
      const o = block.o.forward(block.attended, step);
      residualRmsNormForward(block.input, o, block.mid, block.norm2.data, T, dim, block.normed2, block.rstd2);
      const gate = block.gate.forward(block.normed2, step);
      const up = block.up.forward(block.normed2, step);
      swigluForward(gate, up, block.activated, block.gateSigmoid);
      const down = block.down.forward(block.activated, step);
      const [gain, normed, rstd] = normOf(b + 1);
      residualRmsNormForward(block.mid, down, this.residual[b + 1]!, gain, T, dim, normed, rstd);
    });
    return this.head.forward(this.finalNormed, step);
  }

  private backward(step: GemmStep): void {
    const { dim } = this.shape;
    const T = this.tokens;
    const s = this.scratch;
    for (const param of this.params) param.grad.fill(0);
    this.head.backward(this.dLogits, s.dNormed, false, step);
    rmsNormBackward(this.residual[this.blocks.length]!, this.finalNorm.data, this.finalRstd, s.dNormed, T, dim, s.dh, this.finalNorm.grad, false);
    for (let b = this.blocks.length - 1; b >= 0; b--) {
      const block = this.blocks[b]!;
      // s.dh holds ∂L/∂(block output); the residual passes it straight to `mid` and `input`.
      block.down.backward(s.dh, s.dActivated, false, step);
      swigluBackward(block.gate.lastOutput(), block.up.lastOutput(), block.gateSigmoid, s.dActivated, s.dGate, s.dUp);
      block.gate.backward(s.dGate, s.dNormed, false, step);
      block.up.backward(s.dUp, s.dNormed, true, step);
      rmsNormBackward(block.mid, block.norm2.data, block.rstd2, s.dNormed, T, dim, s.dh, block.norm2.grad, true);
      block.o.backward(s.dh, s.dAttended, false, step);
      block.attention.backward(s.dAttended, s.dq, s.dk, s.dv);
      block.q.backward(s.dq, s.dNormed, false, step);
      block.k.backward(s.dk, s.dNormed, true, step);
      block.v.backward(s.dv, s.dNormed, true, step);
      rmsNormBackward(block.input, block.norm1.data, block.rstd1, s.dNormed, T, dim, s.dh, block.norm1.grad, true);
    }
    const dEmbedding = this.embedding.grad;
    for (let t = 0; t < T; t++) {
      const row = this.inputTokens[t]! * dim;
      for (let c = 0; c < dim; c++) dEmbedding[row + c] = dEmbedding[row + c]! + s.dh[t * dim + c]!;
    }
  }
}

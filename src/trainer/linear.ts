// A linear layer whose three GEMMs — Fprop Y = X·Wᵀ, Dgrad ∇X = ∇Y·W, Wgrad ∇W = ∇Yᵀ·X — each
// run at their own precision, with MX blocks and rotations along each GEMM's reduction dimension.
import { createMxStats, gemm, resetMxStats, type HadamardRotation, type MxStats, type Rng } from '../mx/index.js';
import { paddedLength } from './rotation-fit.js';
import { isBlockPrecision, type BlockPrecision, type GemmConfig, type GemmConfigs, type GemmKind } from '../protocol/config.js';
import type { LayerInfo, OperandStats, WgradError } from '../protocol/telemetry.js';
import { operandSlots, statsFormatOf, type OperandScratch, type OperandSource } from './operand.js';
import type { Param } from './params.js';
import { operandStats, wgradError } from './stats.js';

/** What one training step asks of every linear layer. */
export interface GemmStep {
  step: number;
  gemms: GemmConfigs;
  /** Randomness of the training computation (stochastic rounding). */
  rng: Rng;
  /** Signs for `random-hadamard` (fresh every call) and `fixed-sign-hadamard` (fixed for the run), one per GEMM kind. */
  rotations: Record<GemmKind, HadamardRotation>;
  /** Randomness of telemetry-only quantizations, kept apart so telemetry never changes training. */
  statsRng: Rng;
  statsRotations: Record<GemmKind, HadamardRotation>;
  collectStats: boolean;
  /** Compute the Wgrad error E this step (stats steps and the steps just before them). */
  measureWgradError: boolean;
}

export interface GemmStats {
  gemm: GemmKind;
  precision: GemmConfig['precision'];
  operands: [OperandStats, OperandStats];
  wgradError?: WgradError;
}

function signsFor(config: GemmConfig, rotation: HadamardRotation, length: number): Float32Array | undefined {
  const signed = config.rotation === 'random-hadamard' || config.rotation === 'fixed-sign-hadamard';
  return isBlockPrecision(config.precision) && signed ? rotation.signs(length) : undefined;
}

export class Linear {
  readonly out: number;
  readonly in: number;
  /** Stats of the last step that collected them, one entry per GEMM. */
  readonly stats: GemmStats[] = [];
  private input: Float32Array | undefined;
  private readonly output: Float32Array;
  private readonly mxStats: [MxStats, MxStats] = [createMxStats(), createMxStats()];
  private readonly exactGrad: Float32Array;
  private error: Float32Array;
  private previousError: Float32Array;
  private previousErrorStep = -1;

  constructor(
    /** The trainer lists every layer's sketch positions (a few hundred layers at most). */
    readonly info: LayerInfo & { sketchIndices: number[] },
    readonly weight: Param,
    readonly tokens: number,
    /** Operand scratch, shared by every layer of a model (each GEMM finishes with it before the next starts). */
    private readonly slots: OperandScratch[] = operandSlots(),
  ) {
    this.out = info.outFeatures;
    this.in = info.inFeatures;
    this.output = new Float32Array(tokens * this.out);
    this.exactGrad = new Float32Array(this.out * this.in);
    this.error = new Float32Array(this.out * this.in);
    this.previousError = new Float32Array(this.out * this.in);
  }

  /** Y [tokens, out] = X·Wᵀ; keeps a reference to X for the backward pass (the caller must not overwrite it). */
  forward(x: Float32Array, step: GemmStep): Float32Array {
    this.input = x;
    if (step.collectStats) this.stats.length = 0;
    const xSource: OperandSource = { src: x, rows: this.tokens, cols: this.in, transposed: false, role: 'x' };
    const wSource: OperandSource = { src: this.weight.data, rows: this.out, cols: this.in, transposed: false, role: 'w' };
    this.product('fprop', xSource, wSource, this.output, false, step, 0);
    return this.output;
  }

  /** Y of the last forward (valid until the next forward). */
  lastOutput(): Float32Array {
    return this.output;
  }

  /** dx (+)= ∇Y·W and weight.grad = ∇Yᵀ·X, each at its GEMM's precision. */
  backward(dy: Float32Array, dx: Float32Array, accumulate: boolean, step: GemmStep): void {
    const x = this.input;
    if (x === undefined) throw new Error(`${this.info.name}: backward called before forward`);
    const dySource: OperandSource = { src: dy, rows: this.tokens, cols: this.out, transposed: false, role: 'dy' };
    const wTSource: OperandSource = { src: this.weight.data, rows: this.in, cols: this.out, transposed: true, role: 'w' };
    this.product('dgrad', dySource, wTSource, dx, accumulate, step, 2);
    const dyTSource: OperandSource = { src: dy, rows: this.out, cols: this.tokens, transposed: true, role: 'dy' };
    const xTSource: OperandSource = { src: x, rows: this.in, cols: this.tokens, transposed: true, role: 'x' };
    this.product('wgrad', dyTSource, xTSource, this.weight.grad, false, step, 4);
    if (step.measureWgradError) this.measureWgradError(dy, x, step);
  }

  /**
   * c [a.rows, b.rows] (+)= A·Bᵀ with the reduction (a.cols = b.cols) at the GEMM's precision; on
   * stats steps also records how both operands quantize to MXFP4.
   */
  private product(kind: GemmKind, a: OperandSource, b: OperandSource, c: Float32Array, accumulate: boolean, step: GemmStep, slot: number): void {
    const config = step.gemms[kind];
    if (config.precision === 'fp32' && !step.collectStats) {
      // Nothing to quantize: let the GEMM read the operands in place instead of transposing them.
      gemm(a.rows, b.rows, a.cols, a.src, a.transposed, b.src, !b.transposed, c, accumulate);
      return;
    }
    const slotA = this.slots[slot]!;
    const slotB = this.slots[slot + 1]!;
    // A rotation whose block does not divide the reduction dimension rotates both operands
    // zero-padded to the block's next multiple (as the Python bridge does; runStarted says "padded").
    const k = config.rotation === 'none' ? a.cols : paddedLength(a.cols, config.hadamardBlock);
    const rawA = k === a.cols ? slotA.raw(a) : slotA.padded(slotA.raw(a), a.rows, a.cols, k);
    const rawB = k === a.cols ? slotB.raw(b) : slotB.padded(slotB.raw(b), b.rows, b.cols, k);
    const pa: OperandSource = { ...a, cols: k, transposed: false };
    const pb: OperandSource = { ...b, cols: k, transposed: false };
    const signs = signsFor(config, step.rotations[kind], k);
    const measured = isBlockPrecision(config.precision) && step.collectStats;
    if (measured) this.mxStats.forEach(resetMxStats);
    const qa = slotA.quantized(rawA, pa, config, signs, step.rng, measured ? this.mxStats[0] : undefined);
    const qb = slotB.quantized(rawB, pb, config, signs, step.rng, measured ? this.mxStats[1] : undefined);
    gemm(a.rows, b.rows, k, qa, false, qb, true, c, accumulate);
    if (!step.collectStats) return;
    const statsConfig: GemmConfig & { precision: BlockPrecision } = isBlockPrecision(config.precision) ? { ...config, precision: config.precision } : { ...config, precision: 'mxfp4' };
    if (!measured) {
      this.mxStats.forEach(resetMxStats);
      const statsSigns = signsFor(statsConfig, step.statsRotations[kind], k);
      slotA.measureMxfp4(rawA, pa, statsConfig, statsSigns, step.statsRng, this.mxStats[0]);
      slotB.measureMxfp4(rawB, pb, statsConfig, statsSigns, step.statsRng, this.mxStats[1]);
    }
    const operands: GemmStats['operands'] = [
      operandStats(a.role, this.mxStats[0], statsFormatOf(a, statsConfig)),
      operandStats(b.role, this.mxStats[1], statsFormatOf(b, statsConfig)),
    ];
    this.stats.push({ gemm: kind, precision: config.precision, operands });
  }

  /** E = ∇Ŵ − ∇W against the exact fp32 product; kept one step for lag-1 correlation. */
  private measureWgradError(dy: Float32Array, x: Float32Array, step: GemmStep): void {
    const grad = this.weight.grad;
    // An fp32 Wgrad is the exact product (E = 0); otherwise recompute it from the unquantized operands.
    if (step.gemms.wgrad.precision === 'fp32') this.exactGrad.set(grad);
    else gemm(this.out, this.in, this.tokens, dy, true, x, false, this.exactGrad);
    for (let i = 0; i < grad.length; i++) this.error[i] = grad[i]! - this.exactGrad[i]!;
    if (step.collectStats) {
      const previous = this.previousErrorStep === step.step - 1 ? this.previousError : undefined;
      const record = this.stats.find((s) => s.gemm === 'wgrad');
      if (record) record.wgradError = wgradError(this.exactGrad, this.error, this.info.sketchIndices, previous);
    }
    [this.error, this.previousError] = [this.previousError, this.error];
    this.previousErrorStep = step.step;
  }
}

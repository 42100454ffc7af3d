// A linear layer whose three GEMMs — Fprop Y = X·Wᵀ, Dgrad ∇X = ∇Y·W, Wgrad ∇W = ∇Yᵀ·X — each
// run at their own precision, with MX blocks and rotations along each GEMM's reduction dimension.
import { createMxStats, gemm, resetMxStats, type HadamardRotation, type MxStats, type Rng } from '../mx/index.js';
import type { GemmConfig, GemmConfigs, GemmKind } from '../protocol/config.js';
import type { LayerInfo, OperandStats, WgradError } from '../protocol/telemetry.js';
import { OperandScratch, type OperandSource } from './operand.js';
import type { Param } from './params.js';
import { operandStats, wgradError } from './stats.js';

/** What one training step asks of every linear layer. */
export interface GemmStep {
  step: number;
  gemms: GemmConfigs;
  /** Randomness of the training computation (stochastic rounding). */
  rng: Rng;
  /** Fresh signs for `random-hadamard`, one generator per GEMM kind. */
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
  return config.precision === 'mxfp4' && config.rotation === 'random-hadamard' ? rotation.signs(length) : undefined;
}

export class Linear {
  readonly out: number;
  readonly in: number;
  /** Stats of the last step that collected them, one entry per GEMM. */
  readonly stats: GemmStats[] = [];
  private input: Float32Array | undefined;
  private readonly output: Float32Array;
  private readonly slots = Array.from({ length: 6 }, () => new OperandScratch());
  private readonly mxStats: [MxStats, MxStats] = [createMxStats(), createMxStats()];
  private readonly exactGrad: Float32Array;
  private error: Float32Array;
  private previousError: Float32Array;
  private previousErrorStep = -1;

  constructor(
    readonly info: LayerInfo,
    readonly weight: Param,
    readonly tokens: number,
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
    const [xq, wq] = this.operands(
      'fprop',
      { src: x, rows: this.tokens, cols: this.in, transposed: false, role: 'x' },
      { src: this.weight.data, rows: this.out, cols: this.in, transposed: false, role: 'w' },
      step,
      0,
    );
    gemm(this.tokens, this.out, this.in, xq, false, wq, true, this.output);
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
    const [dyq, wTq] = this.operands(
      'dgrad',
      { src: dy, rows: this.tokens, cols: this.out, transposed: false, role: 'dy' },
      { src: this.weight.data, rows: this.in, cols: this.out, transposed: true, role: 'w' },
      step,
      2,
    );
    gemm(this.tokens, this.in, this.out, dyq, false, wTq, true, dx, accumulate);

    const dySource: OperandSource = { src: dy, rows: this.out, cols: this.tokens, transposed: true, role: 'dy' };
    const xSource: OperandSource = { src: x, rows: this.in, cols: this.tokens, transposed: true, role: 'x' };
    const [dyTq, xTq, dyT, xT] = this.operands('wgrad', dySource, xSource, step, 4);
    gemm(this.out, this.in, this.tokens, dyTq, false, xTq, true, this.weight.grad);
    if (step.measureWgradError) this.measureWgradError(dyT, xT, step);
  }

  /** Both operands quantized (and their fp32 forms), plus stats on stats steps. */
  private operands(kind: GemmKind, a: OperandSource, b: OperandSource, step: GemmStep, slot: number): [Float32Array, Float32Array, Float32Array, Float32Array] {
    const config = step.gemms[kind];
    const signs = signsFor(config, step.rotations[kind], a.cols);
    const slotA = this.slots[slot]!;
    const slotB = this.slots[slot + 1]!;
    const rawA = slotA.raw(a);
    const rawB = slotB.raw(b);
    const measured = config.precision === 'mxfp4' && step.collectStats;
    if (measured) this.mxStats.forEach(resetMxStats);
    const qa = slotA.quantized(rawA, a, config, signs, step.rng, measured ? this.mxStats[0] : undefined);
    const qb = slotB.quantized(rawB, b, config, signs, step.rng, measured ? this.mxStats[1] : undefined);
    if (step.collectStats) {
      if (!measured) {
        this.mxStats.forEach(resetMxStats);
        const statsConfig: GemmConfig = { ...config, precision: 'mxfp4' };
        const statsSigns = signsFor(statsConfig, step.statsRotations[kind], a.cols);
        slotA.measureMxfp4(rawA, a, statsConfig, statsSigns, step.statsRng, this.mxStats[0]);
        slotB.measureMxfp4(rawB, b, statsConfig, statsSigns, step.statsRng, this.mxStats[1]);
      }
      this.stats.push({ gemm: kind, precision: config.precision, operands: [operandStats(a.role, this.mxStats[0]), operandStats(b.role, this.mxStats[1])] });
    }
    return [qa, qb, rawA, rawB];
  }

  /** E = ∇Ŵ − ∇W against the exact fp32 product; kept one step for lag-1 correlation. */
  private measureWgradError(dyT: Float32Array, xT: Float32Array, step: GemmStep): void {
    gemm(this.out, this.in, this.tokens, dyT, false, xT, true, this.exactGrad);
    const grad = this.weight.grad;
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

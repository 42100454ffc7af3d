// AdamW with linear warmup + cosine decay and global-norm gradient clipping, on fp32 master weights.
import type { RunConfig } from '../protocol/config.js';
import { trainerKernels } from './ops.js';
import type { Param } from './params.js';

export interface OptimizerSettings {
  lr: number;
  minLrFrac: number;
  warmup: number;
  weightDecay: number;
  beta1: number;
  beta2: number;
  eps: number;
  clip: number;
}

export function optimizerSettings(config: RunConfig): OptimizerSettings {
  const read = (key: keyof OptimizerSettings): number => {
    const value = config.optimizer[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new Error(`config.optimizer.${key} must be a non-negative number, got ${JSON.stringify(value)}`);
    return value;
  };
  return { lr: read('lr'), minLrFrac: read('minLrFrac'), warmup: read('warmup'), weightDecay: read('weightDecay'), beta1: read('beta1'), beta2: read('beta2'), eps: read('eps'), clip: read('clip') };
}

/** Learning rate at 0-based `step` of `totalSteps`. */
export function learningRate(settings: OptimizerSettings, step: number, totalSteps: number): number {
  if (step < settings.warmup) return (settings.lr * (step + 1)) / settings.warmup;
  const span = Math.max(1, totalSteps - settings.warmup);
  const progress = Math.min(1, (step - settings.warmup) / span);
  const minLr = settings.lr * settings.minLrFrac;
  return minLr + 0.5 * (settings.lr - minLr) * (1 + Math.cos(Math.PI * progress));
}

/** ‖all gradients‖₂, summed in float64. */
export function globalGradNorm(params: readonly Param[]): number {
  let sumSq = 0;
  for (const { grad } of params) for (let i = 0; i < grad.length; i++) sumSq += grad[i]! * grad[i]!;
  return Math.sqrt(sumSq);
}

export class AdamW {
  readonly m: Float32Array[];
  readonly v: Float32Array[];
  /** Updates applied so far (bias correction uses it). */
  t = 0;

  constructor(
    readonly params: readonly Param[],
    readonly settings: OptimizerSettings,
  ) {
    this.m = params.map((p) => new Float32Array(p.data.length));
    this.v = params.map((p) => new Float32Array(p.data.length));
  }

  /** One update with gradients scaled by `gradScale` (clipping). */
  step(lr: number, gradScale: number): void {
    const { beta1, beta2, eps, weightDecay } = this.settings;
    this.t++;
    const correction1 = 1 - Math.pow(beta1, this.t);
    const correction2 = 1 - Math.pow(beta2, this.t);
    this.params.forEach((param, index) => {
      const m = this.m[index]!;
      const v = this.v[index]!;
      const decay = param.decay ? lr * weightDecay : 0;
      const { data, grad } = param;
      const kernels = trainerKernels();
      if (kernels) {
        kernels.adamW({ data, grad, m, v, gradScale, beta1, beta2, correction1, correction2, lr, eps, decay });
        return;
      }
      for (let i = 0; i < data.length; i++) {
        const g = grad[i]! * gradScale;
        m[i] = beta1 * m[i]! + (1 - beta1) * g;
        v[i] = beta2 * v[i]! + (1 - beta2) * g * g;
        data[i] = data[i]! - lr * (m[i]! / correction1 / (Math.sqrt(v[i]! / correction2) + eps)) - decay * data[i]!;
      }
    });
  }
}

/** Scale that brings the gradient norm down to `clip` (1 when already within it or clipping is off). */
export function clipScale(gradNorm: number, clip: number): number {
  return clip > 0 && gradNorm > clip ? clip / gradNorm : 1;
}

// The emulation trainer's presets: model shape, batch and optimizer as RunConfig fields, so a
// run's config fully describes how to reproduce it.
import type { GemmConfig, RunConfig } from '../protocol/config.js';
import type { ModelShape } from './model.js';

export type PresetName = 'tiny' | 'small';
export const PRESET_NAMES: readonly PresetName[] = ['tiny', 'small'];

/** The default data set: a sample of the Brown corpus shipped with the extension. */
export const DEFAULT_DATA = 'brown-sample';

export const FP32_GEMM: GemmConfig = { precision: 'fp32', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false };

interface PresetShape extends Omit<ModelShape, 'vocab'> {
  steps: number;
  lr: number;
  warmup: number;
  evalEvery: number;
}

// Every reduction dimension (dim, hidden, vocab 256, batch·seqLen) is a multiple of 32 so MX blocks
// tile it exactly, and of the Hadamard block for the blocks a preset supports.
const SHAPES: Record<PresetName, PresetShape> = {
  tiny: { dim: 64, layers: 2, heads: 4, hidden: 192, seqLen: 64, batch: 8, steps: 300, lr: 5e-3, warmup: 20, evalEvery: 25 },
  small: { dim: 128, layers: 4, heads: 4, hidden: 384, seqLen: 128, batch: 8, steps: 1000, lr: 3e-3, warmup: 50, evalEvery: 50 },
};

export function presetConfig(preset: PresetName): RunConfig {
  const shape = SHAPES[preset];
  if (shape === undefined) throw new Error(`unknown preset "${String(preset)}": use one of ${PRESET_NAMES.join(', ')}`);
  return {
    preset,
    seed: 1,
    steps: shape.steps,
    tokensPerStep: shape.batch * shape.seqLen,
    statsEvery: 10,
    sketchSize: 64,
    evalEvery: shape.evalEvery,
    data: DEFAULT_DATA,
    gemms: { fprop: { ...FP32_GEMM }, dgrad: { ...FP32_GEMM }, wgrad: { ...FP32_GEMM } },
    model: { vocab: 256, dim: shape.dim, layers: shape.layers, heads: shape.heads, hidden: shape.hidden, seqLen: shape.seqLen, batch: shape.batch },
    optimizer: { lr: shape.lr, minLrFrac: 0.1, warmup: shape.warmup, weightDecay: 0.1, beta1: 0.9, beta2: 0.95, eps: 1e-8, clip: 1 },
  };
}

/**
 * The tiny preset shrunk to a micro model (1 layer, dim 32, 32 tokens a step, stats every 2 steps):
 * a training step takes milliseconds, for the start-up warm-up and the trainer tests.
 */
export function microModelConfig(): RunConfig {
  const config = presetConfig('tiny');
  config.model = { ...config.model, dim: 32, layers: 1, heads: 2, hidden: 64, seqLen: 16, batch: 2 };
  config.tokensPerStep = 32;
  config.statsEvery = 2;
  config.sketchSize = 16;
  return config;
}

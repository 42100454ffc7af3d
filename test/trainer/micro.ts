// A micro model config so trainer tests run in well under a second per step.
import type { GemmConfig, RunConfig } from '../../src/protocol/config.js';
import { presetConfig } from '../../src/trainer/presets.js';

export function microConfig(gemms: Partial<Record<'fprop' | 'dgrad' | 'wgrad', Partial<GemmConfig>>> = {}): RunConfig {
  const config = presetConfig('tiny');
  config.model = { ...config.model, dim: 32, layers: 1, heads: 2, hidden: 64, seqLen: 16, batch: 2 };
  config.tokensPerStep = 32;
  config.steps = 4;
  config.statsEvery = 2;
  config.evalEvery = 2;
  config.sketchSize = 16;
  config.optimizer = { ...config.optimizer, warmup: 1 };
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) config.gemms[kind] = { ...config.gemms[kind], ...gemms[kind] };
  return config;
}

export const ALL_MXFP4: Partial<GemmConfig> = { precision: 'mxfp4' };

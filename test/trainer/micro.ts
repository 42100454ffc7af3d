// A micro model config so trainer tests run in well under a second per step.
import type { GemmConfig, RunConfig } from '../../src/protocol/config.js';
import { microModelConfig } from '../../src/trainer/presets.js';

export function microConfig(gemms: Partial<Record<'fprop' | 'dgrad' | 'wgrad', Partial<GemmConfig>>> = {}): RunConfig {
  const config = microModelConfig();
  config.steps = 4;
  config.evalEvery = 2;
  config.optimizer = { ...config.optimizer, warmup: 1 };
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) config.gemms[kind] = { ...config.gemms[kind], ...gemms[kind] };
  return config;
}

export const ALL_MXFP4: Partial<GemmConfig> = { precision: 'mxfp4' };

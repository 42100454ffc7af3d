/**
 * Start-up warm-up of the trainer process, off the hot path: V8 first runs WebAssembly on its
 * baseline compiler and JavaScript in its interpreter, and moves each function to its optimizing
 * compiler only once it is hot, so the first training step of a fresh process ran several times
 * slower than later ones. Running every kernel a few rounds on small inputs and a few steps of a
 * throwaway micro model (every precision path, a stats step included) leaves the real first step
 * near steady-state speed. Measured in bench/warm-up.bench.ts.
 */
import { warmUpMxKernels } from '../mx/warm-up.js';
import type { RunConfig } from '../protocol/config.js';
import { warmUpTrainerKernels } from './ops.js';
import { microModelConfig } from './presets.js';
import { Trainer } from './trainer.js';

function warmUpConfig(precision: 'fp32' | 'mxfp4'): RunConfig {
  const config = microModelConfig();
  config.steps = 1_000;
  config.evalEvery = 0;
  for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) config.gemms[kind] = { ...config.gemms[kind], precision };
  return config;
}

/** Returns the milliseconds it took. */
export function warmUpTrainer(): number {
  const started = performance.now();
  warmUpMxKernels();
  warmUpTrainerKernels();
  for (const precision of ['mxfp4', 'fp32'] as const) {
    const trainer = new Trainer(warmUpConfig(precision), 'warm-up');
    for (let step = 0; step < 6; step++) trainer.step(() => {});
  }
  return performance.now() - started;
}

// Recorded runs the browser tests share: three synthetic runs of the same model (bf16-like baseline,
// deterministic H16, random Hadamard with a NaN-scale event), long enough for every view to draw.
import { syntheticRun, type SyntheticRunOptions } from '../fixtures/synthetic-run.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';

/** A mixture-of-experts run: 2 blocks of 4 attention projections and 8 experts of 2 parameters (40 layers, 4 groups). */
export const EXPERTS_RUN = { runId: 'moe', name: 'experts', blocks: 2, experts: 8, evalEvery: 10, sketchSize: 8, rotation: 'hadamard', seed: 5 } as const;

export const BASE_RUN: Omit<SyntheticRunOptions, 'runId' | 'rotation' | 'seed'> = { blocks: 4, steps: 600, statsEvery: 20, evalEvery: 50, sketchSize: 64 };

export function recordedRuns(): TelemetryRecord[] {
  return [
    ...syntheticRun({ ...BASE_RUN, runId: 'bf16', name: 'bf16 baseline', rotation: 'none', seed: 1, lossFloor: 2.9 }),
    ...syntheticRun({ ...BASE_RUN, runId: 'h16', name: 'mxfp4 · H16', rotation: 'hadamard', seed: 2, lossFloor: 3.0 }),
    ...syntheticRun({ ...BASE_RUN, runId: 'rht', name: 'mxfp4 · RHT16', rotation: 'random-hadamard', seed: 3, lossFloor: 2.95, nanAt: { step: 400, layer: 'blocks.2.mlp.down' } }),
  ];
}

// A stand-in for the emulation trainer: emits runStarted, steps with layer stats, then runEnded,
// yielding to the event loop between steps like the real trainer does.
import type { RunConfig, TelemetryRecord } from '../../src/protocol/index.js';
import { join } from 'node:path';
import type { LaunchedRun, RunLauncher } from '../../src/link/trainer-server.js';
import { RunLogWriter } from '../../src/runlog/index.js';
import { forEachStatsRecord, syntheticLayers, syntheticStep } from '../fixtures/synthetic-llama8b.js';

export const baseConfig: RunConfig = {
  preset: 'tiny', seed: 1, steps: 20, tokensPerStep: 512, statsEvery: 5, sketchSize: 64, evalEvery: 0, data: 'test',
  gemms: {
    fprop: { precision: 'mxfp4', rotation: 'none', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: false },
    dgrad: { precision: 'mxfp4', rotation: 'none', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: false },
    wgrad: { precision: 'mxfp4', rotation: 'none', hadamardBlock: 32, rounding: 'nearest-even', srPrescale: false },
  },
  model: {}, optimizer: {},
};

export interface FakeLauncher {
  launch: RunLauncher;
  /** Configs the launched runs were started with, in order. */
  configs: RunConfig[];
}

/**
 * `stepDelayMs` between steps (0 = setImmediate); 2 layers so a stats step is 6 records. With
 * `logDir`, each run also writes a run log there, as the real trainer does.
 */
export function fakeLauncher(stepDelayMs = 0, logDir?: string): FakeLauncher {
  const configs: RunConfig[] = [];
  let runs = 0;
  const launch: RunLauncher = ({ config, onRecord, signal }) => {
    configs.push(config);
    const runId = `fake-${++runs}`;
    const layers = syntheticLayers().slice(0, 2);
    const dir = logDir === undefined ? undefined : join(logDir, runId);
    let writer: RunLogWriter | undefined;
    const emit = (record: TelemetryRecord) => {
      if (record.type === 'runStarted' && dir) writer = new RunLogWriter(dir, record);
      else writer?.append(record);
      writer?.flush();
      onRecord(record);
    };
    const done = (async () => {
      emit({ type: 'runStarted', runId, name: runId, startedAt: new Date().toISOString(), trainer: { name: 'fake', version: '0' }, config, layers });
      let step = 0;
      for (; step < config.steps && !signal.aborted; step++) {
        await new Promise((resolve) => (stepDelayMs > 0 ? setTimeout(resolve, stepDelayMs) : setImmediate(resolve)));
        emit(syntheticStep(runId, step));
        if (step % config.statsEvery === 0) forEachStatsRecord(runId, step, layers, emit);
      }
      const ended = { type: 'runEnded', runId, step: step - 1, status: signal.aborted ? 'stopped' : 'completed', reason: signal.aborted ? 'stop requested' : 'done', endedAt: new Date().toISOString() } as const;
      emit(ended);
      writer?.close();
      return ended;
    })();
    const run: LaunchedRun = { runId, done, saveCheckpoint: async () => `/tmp/${runId}/checkpoints/step.safetensors`, ...(dir ? { dir } : {}) };
    return run;
  };
  return { launch, configs };
}

// One training run: model, data, optimizer, telemetry and the run log, driven step by step so the
// event loop (a websocket server in the same process) stays responsive.
import type { RunConfig } from '../protocol/config.js';
import type { RunEndedRecord, TelemetryRecord } from '../protocol/telemetry.js';

export interface RunOptions {
  config: RunConfig;
  /** Run directories are created inside this folder. */
  outDir: string;
  name?: string;
  onRecord?: (record: TelemetryRecord) => void;
  /** Aborting ends the run with status `stopped`. */
  signal?: AbortSignal;
  /** A .safetensors checkpoint to restart from. */
  resumeFrom?: string;
}

export interface RunHandle {
  runId: string;
  dir: string;
  done: Promise<RunEndedRecord>;
  /** Writes a checkpoint of the current weights; resolves to its path. */
  saveCheckpoint(): Promise<string>;
}

export function startRun(options: RunOptions): RunHandle {
  void options;
  throw new Error('startRun: not implemented yet');
}

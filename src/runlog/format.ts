// File names inside one run directory (see docs/trainer.md, "Run log").
import { join } from 'node:path';

export const RUN_JSON = 'run.json';
export const TELEMETRY_NDJSON = 'telemetry.ndjson';
export const CHECKPOINTS_DIR = 'checkpoints';

export function checkpointPath(runDir: string, step: number): string {
  return join(runDir, CHECKPOINTS_DIR, `step-${String(step).padStart(8, '0')}.safetensors`);
}

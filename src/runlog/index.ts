// Run logs: one directory per run with run.json, telemetry.ndjson and checkpoints/ (docs/trainer.md).
export { RunLogWriter } from './writer.js';
export { readRunLog, readRunLogLines, type RunLogSummary } from './reader.js';
export { RUN_JSON, TELEMETRY_NDJSON, CHECKPOINTS_DIR, checkpointPath } from './format.js';

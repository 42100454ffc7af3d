// Public API of the TypeScript emulation trainer: start a run, watch its telemetry, stop it.
export { presetConfig, PRESET_NAMES, type PresetName } from './presets.js';
export { startRun, type RunOptions, type RunHandle } from './run.js';

// The emulated run's config, assembled in one place. The extension's settings (preset, stats
// interval) give the config the embedded trainer's runs start from; the extension shows it as the
// next run while no trainer is connected, starts the trainer child with the flags that rebuild it
// (test/trainer/emulation-config.test.ts pins that mxscope-train parses them into this same
// config), tells a trainer it reuses the settings that may have changed since it started, and the
// child applies next-run changes to it with applyEmulationChange.
import { mergeRunConfig, type NextRunConfig, type RunConfig } from '../protocol/config.js';
import { modelShape } from './model.js';
import { checkEmbeddedOptIns } from './stats-opt-ins.js';
import { PRESET_NAMES, presetConfig, type PresetName } from './presets.js';

/**
 * Emulated runs start as the case MX Scope is for: every GEMM in MXFP4, no rotation, nearest-even.
 * Switch Rotation Mode and Set GEMM Precision change the next run from there.
 */
export const EMULATION_PRECISION = 'mxfp4';

/** What the user picks for emulated runs (the `mxscope.emulation.*` settings). */
export interface EmulationSettings {
  preset: PresetName;
  statsEvery: number;
}

/** The config an emulated run starts from. */
export function emulationConfig(settings: EmulationSettings): RunConfig {
  const gemm = { precision: EMULATION_PRECISION } as const;
  return mergeRunConfig(presetConfig(settings.preset), { statsEvery: settings.statsEvery, gemms: { fprop: gemm, dgrad: gemm, wgrad: gemm } });
}

/** `mxscope-train --serve` flags whose base config is emulationConfig(settings). */
export function emulationServeArgs(settings: EmulationSettings): string[] {
  return ['--preset', settings.preset, '--precision', EMULATION_PRECISION, '--stats-every', String(settings.statsEvery)];
}

/**
 * The change that brings an already running emulation trainer (same preset; a preset change starts
 * a new one) up to the settings: the stats interval may have changed since it started.
 */
export function emulationSettingsChange(settings: EmulationSettings): NextRunConfig {
  return { statsEvery: settings.statsEvery };
}

/**
 * A next-run change applied to an emulation trainer's config. A preset names a model shape and
 * optimizer: switching it starts from that preset's config, keeping the GEMM settings, seed and stats
 * interval chosen so far, then applies the rest of the change.
 */
export function applyEmulationChange(base: RunConfig, change: NextRunConfig): RunConfig {
  const merged = mergedChange(base, change);
  // Refused now, naming what to change (a recipe that cannot run, a shape a format block does not
  // divide, a stats opt-in this trainer does not offer), rather than when the run starts.
  modelShape(merged);
  checkEmbeddedOptIns(merged);
  return merged;
}

function mergedChange(base: RunConfig, change: NextRunConfig): RunConfig {
  if (change.preset === undefined || change.preset === base.preset) return mergeRunConfig(base, change);
  if (!(PRESET_NAMES as readonly string[]).includes(change.preset)) {
    throw new Error(`unknown preset "${change.preset}": this trainer has ${PRESET_NAMES.join(', ')}`);
  }
  const preset = presetConfig(change.preset as PresetName);
  return mergeRunConfig({ ...preset, gemms: base.gemms, seed: base.seed, statsEvery: base.statsEvery }, change);
}

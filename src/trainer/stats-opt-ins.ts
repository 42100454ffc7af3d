// The stats opt-ins a publisher may offer to cut what telemetry costs it (RunConfig.statsLayerGroups,
// wgradErrorRowStride, wgradErrorLag1), which the embedded trainer refuses: its models are small, so every layer's
// stats and the exact Wgrad error cost it little, and its runs must not carry a label saying their
// error is an estimate when it is exact. Refused when a next-run change asks for one (so the quick
// action that sent it says why at once) and again when a run starts from such a config.
import type { RunConfig } from '../protocol/config.js';

export function checkEmbeddedOptIns(config: Pick<RunConfig, 'statsLayerGroups' | 'wgradErrorRowStride' | 'wgradErrorLag1'>): void {
  if ((config.statsLayerGroups ?? 1) !== 1) {
    throw new Error(`config.statsLayerGroups: the embedded trainer reports every layer at every stats step (layer groups are for the Python bridge on large models); set statsLayerGroups to 1 or leave it out (got ${config.statsLayerGroups})`);
  }
  if ((config.wgradErrorRowStride ?? 1) !== 1) {
    throw new Error(`config.wgradErrorRowStride: the embedded trainer computes the Wgrad error on every row (sampled rows are for the Python bridge on large models); set wgradErrorRowStride to 1 or leave it out (got ${config.wgradErrorRowStride})`);
  }
  if ((config.wgradErrorLag1 ?? true) !== true) {
    throw new Error(`config.wgradErrorLag1: the embedded trainer always measures lag-1 (turning it off is for the Python bridge on large models); set wgradErrorLag1 to true or leave it out (got ${config.wgradErrorLag1})`);
  }
}

// How the layer × step heatmap labels and shades each per-layer metric, and which exist for the
// wgrad GEMM only (they come from the Wgrad error measurement).
import type { GridMetric } from '../../../src/protocol/webview.js';

export const GRID_METRIC_INFO: Record<GridMetric, { label: string; worse: 'higher' | 'lower' | 'larger-change' }> = {
  wgradRelErr: { label: 'Wgrad relative error', worse: 'higher' },
  saturatedPct: { label: 'Saturated %', worse: 'higher' },
  flushedPct: { label: 'Flushed %', worse: 'higher' },
  sqnrDb: { label: 'SQNR (dB)', worse: 'lower' },
  lag1Cos: { label: 'Lag-1 error correlation', worse: 'higher' },
  scaleShift: { label: 'Scale shift (Δ mean exponent)', worse: 'larger-change' },
};

/** Metrics that only wgrad records carry. */
export const WGRAD_ONLY: ReadonlySet<GridMetric> = new Set(['wgradRelErr', 'lag1Cos']);


// Where "Show in Dashboard" on a divergence or spike notification lands: the layer × step heatmap
// with the event's step marked when a layer moved first (its GEMM chosen), else the Loss tab; the
// loss chart zoomed to the steps before the event either way.
import type { UiState } from './model/ui-state.js';
import type { FocusAt } from '../../src/protocol/webview.js';

export function focusAt(at: FocusAt, state: UiState): Partial<UiState> {
  const before = Math.max(20, Math.round(at.step * 0.25));
  const zoom = state.xAxis === 'step' ? { min: Math.max(0, at.step - before), max: at.step + Math.ceil(before / 4) } : null;
  const patch: Partial<UiState> = { step: at.step, zoom, tab: at.layer === null ? 'loss' : 'layers' };
  if (at.layer !== null) patch.layer = at.layer;
  if (at.gemm) patch.gridGemm = at.gemm;
  if (at.metric) patch.gridMetric = at.metric;
  return patch;
}

// The layer × step grid of one per-layer metric for one run and GEMM: every layer (model order)
// against every stats step any layer has, so the engineer sees which layer moved first. Cells
// without a record at that step are null. Layers with no record of the GEMM in the whole run (a
// LoRA model's frozen base layers have no Wgrad) are named apart instead of filling empty rows.
// The metric is read off the stored rows in place (RunView.forEachLayerStat): a heatmap shown during
// a run is asked for again after every stats step, and decoding every kept record for it took
// 70-190 ms at 224 layers.
import type { GemmKind } from '../protocol/config.js';
import type { LayerGridMessage, RequestLayerGridMessage } from '../protocol/webview.js';
import type { RunView } from '../store/run-store.js';
import { layerMetric } from '../protocol/layer-metrics.js';

export function layerGrid(run: RunView, request: RequestLayerGridMessage): LayerGridMessage {
  const gemm: GemmKind = request.gemm;
  const metric = layerMetric(request.metric);
  const layers: string[] = [];
  const withoutStats: string[] = [];
  // One pass over the series: each kept record's row, step and value; the columns are known after it.
  const rowOf: number[] = [];
  const stepOf: number[] = [];
  const valueOf: (number | null)[] = [];
  for (let index = 0; index < run.layers.length; index++) {
    const { name } = run.layers[index]!;
    const row = layers.length;
    const count = run.forEachLayerStat(index, gemm, (fields, previous) => {
      rowOf.push(row);
      stepOf.push(fields.step);
      valueOf.push(metric.ofRecord(fields, previous));
    });
    (count > 0 ? layers : withoutStats).push(name);
  }
  const steps = [...new Set(stepOf)].sort((a, b) => a - b);
  const column = new Map(steps.map((step, i) => [step, i]));
  const values: (number | null)[] = new Array(layers.length * steps.length).fill(null);
  for (let i = 0; i < rowOf.length; i++) values[rowOf[i]! * steps.length + column.get(stepOf[i]!)!] = valueOf[i]!;
  return { type: 'layerGrid', requestId: request.requestId, runId: run.summary.runId, metric: request.metric, gemm, layers, withoutStats, steps, values };
}

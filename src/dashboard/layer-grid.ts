// The layer × step grid of one per-layer metric for one run and GEMM: every layer (model order)
// against every stats step any layer has, so the engineer sees which layer moved first. Cells
// without a record at that step are null. Layers with no record of the GEMM in the whole run (a
// LoRA model's frozen base layers have no Wgrad) are named apart instead of filling empty rows.
import type { GemmKind } from '../protocol/config.js';
import type { LayerGridMessage, RequestLayerGridMessage } from '../protocol/webview.js';
import type { RunView } from '../store/run-store.js';
import { layerMetric } from '../protocol/layer-metrics.js';

export function layerGrid(run: RunView, request: RequestLayerGridMessage): LayerGridMessage {
  const gemm: GemmKind = request.gemm;
  const metric = layerMetric(request.metric);
  const all = run.layers.map(({ name }) => ({ name, history: run.layerStats(name, gemm) }));
  const rows = all.filter(({ history }) => history.length > 0);
  const histories = rows.map(({ history }) => history);
  const steps = [...new Set(histories.flatMap((history) => history.map((record) => record.step)))].sort((a, b) => a - b);
  const column = new Map(steps.map((step, i) => [step, i]));
  const values: (number | null)[] = new Array(rows.length * steps.length).fill(null);
  histories.forEach((history, row) => {
    history.forEach((record, i) => {
      values[row * steps.length + column.get(record.step)!] = metric.ofRecord(record, history[i - 1]);
    });
  });
  return { type: 'layerGrid', requestId: request.requestId, runId: run.summary.runId, metric: request.metric, gemm,
    layers: rows.map(({ name }) => name), withoutStats: all.filter(({ history }) => history.length === 0).map(({ name }) => name), steps, values };
}

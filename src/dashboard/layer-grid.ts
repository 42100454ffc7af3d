// The layer × step grid of one per-layer metric for one run and GEMM: every layer (model order)
// against every stats step any layer has, so the engineer sees which layer moved first. Cells
// without a record at that step are null.
import type { GemmKind } from '../protocol/config.js';
import type { LayerGridMessage, RequestLayerGridMessage } from '../protocol/webview.js';
import type { RunView } from '../store/run-store.js';
import { layerMetric } from '../protocol/layer-metrics.js';

export function layerGrid(run: RunView, request: RequestLayerGridMessage): LayerGridMessage {
  const gemm: GemmKind = request.gemm;
  const metric = layerMetric(request.metric);
  const histories = run.layers.map(({ name }) => run.layerStats(name, gemm));
  const steps = [...new Set(histories.flatMap((history) => history.map((record) => record.step)))].sort((a, b) => a - b);
  const column = new Map(steps.map((step, i) => [step, i]));
  const values: (number | null)[] = new Array(run.layers.length * steps.length).fill(null);
  histories.forEach((history, row) => {
    history.forEach((record, i) => {
      values[row * steps.length + column.get(record.step)!] = metric.ofRecord(record, history[i - 1]);
    });
  });
  return { type: 'layerGrid', requestId: request.requestId, runId: run.summary.runId, metric: request.metric, gemm, layers: run.layers.map((layer) => layer.name), steps, values };
}

// Per-layer metrics read off one layer-stats record, shared by the layer × step heatmap and the
// divergence attribution ("which layer left its running range first"). Saturation and flush are the
// worst operand of the GEMM, SQNR the lowest; scale is the mean E8M0 exponent over both operands'
// blocks (the heatmap shows its change from one stats step to the next: a scale shift).
import type { LayerStatsRecord } from '../protocol/telemetry.js';
import type { GridMetric } from '../protocol/webview.js';

/** Mean unbiased block exponent over the record's operands (NaN blocks left out); null without blocks. */
export function meanExponent(record: LayerStatsRecord): number | null {
  let sum = 0;
  let count = 0;
  for (const { histogram } of record.operands) {
    histogram.counts.forEach((n, i) => {
      sum += n * (histogram.minExp + i);
      count += n;
    });
  }
  return count > 0 ? sum / count : null;
}

/** The metric's value on `record`; `previous` (same layer and GEMM, the stats step before) for scale shift. */
export function metricOf(record: LayerStatsRecord, metric: GridMetric, previous?: LayerStatsRecord): number | null {
  switch (metric) {
    case 'wgradRelErr':
      return record.wgradError?.relErr ?? null;
    case 'lag1Cos':
      return record.wgradError?.lag1Cos ?? null;
    case 'saturatedPct':
      return record.operands.length > 0 ? Math.max(...record.operands.map((o) => o.saturatedFrac)) * 100 : null;
    case 'flushedPct':
      return record.operands.length > 0 ? Math.max(...record.operands.map((o) => o.flushedFrac)) * 100 : null;
    case 'sqnrDb': {
      const values = record.operands.map((o) => o.sqnrDb).filter((v): v is number => v !== null);
      return values.length > 0 ? Math.min(...values) : null;
    }
    case 'scaleShift': {
      const now = meanExponent(record);
      const before = previous ? meanExponent(previous) : null;
      return now === null || before === null ? null : now - before;
    }
  }
}

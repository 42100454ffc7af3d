// The layer overview's metrics, one object each: how the host computes it from a layer's newest
// stats, and how the dashboard labels, formats and ranks it. Their order is the order of
// LayerRow.values on the wire, so adding a metric here adds it everywhere.
import type { LayerStatsRecord, OperandStats } from './telemetry.js';

/** A layer's newest stats record of each GEMM that has one, and its Wgrad record among them. */
export interface LatestLayerStats {
  records: readonly LayerStatsRecord[];
  wgrad: LayerStatsRecord | undefined;
}

export interface LayerMetricSpec<Name extends string = string> {
  /** Key in the dashboard's state and the CSV header. */
  name: Name;
  /** Short label for column headers and menus. */
  label: string;
  unit: '' | '%' | 'dB';
  /** Whether larger values are worse (error, saturation) or smaller ones (SQNR): worst-first order and shading. */
  worse: 'higher' | 'lower';
  format(value: number | null): string;
  /** The value for one layer; null where its stats do not say (no Wgrad record yet, SQNR of all-zero operands). */
  of(latest: LatestLayerStats): number | null;
}

/** A number in `digits` significant digits, exponent form when very large or small; '—' when absent. */
export function formatNumber(value: number | null, digits = 3): string {
  if (value === null || !Number.isFinite(value)) return '—';
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e5 || abs < 1e-3)) return value.toExponential(2);
  return Number(value.toPrecision(digits)).toString();
}

const operandsOf = (latest: LatestLayerStats): OperandStats[] => latest.records.flatMap((record) => record.operands);
/** The worst operand over all GEMMs: the largest fraction, as a percentage. */
const worstPercent = (latest: LatestLayerStats, fraction: (operand: OperandStats) => number): number | null => {
  const operands = operandsOf(latest);
  return operands.length === 0 ? null : Math.max(0, ...operands.map((operand) => fraction(operand) * 100));
};
const metric = <const Name extends string>(spec: LayerMetricSpec<Name>): LayerMetricSpec<Name> => spec;
const format = (value: number | null): string => formatNumber(value);

export const LAYER_METRIC_SPECS = [
  metric({ name: 'wgradRelErr', label: 'Wgrad rel. error', unit: '', worse: 'higher', format, of: (l) => l.wgrad?.wgradError?.relErr ?? null }),
  metric({ name: 'alignment', label: 'Alignment', unit: '', worse: 'lower', format, of: (l) => l.wgrad?.wgradError?.alignment ?? null }),
  metric({ name: 'saturatedPct', label: 'Saturated', unit: '%', worse: 'higher', format, of: (l) => worstPercent(l, (o) => o.saturatedFrac) }),
  metric({ name: 'flushedPct', label: 'Flushed', unit: '%', worse: 'higher', format, of: (l) => worstPercent(l, (o) => o.flushedFrac) }),
  metric({
    name: 'sqnrDb',
    label: 'SQNR',
    unit: 'dB',
    worse: 'lower',
    format,
    of: (l) => {
      const known = operandsOf(l).flatMap((operand) => (operand.sqnrDb === null ? [] : [operand.sqnrDb]));
      return known.length === 0 ? null : Math.min(...known);
    },
  }),
  metric({ name: 'lag1Cos', label: 'Lag-1 error corr.', unit: '', worse: 'higher', format, of: (l) => l.wgrad?.wgradError?.lag1Cos ?? null }),
] as const;

export type LayerMetric = (typeof LAYER_METRIC_SPECS)[number]['name'];
export const LAYER_METRICS: readonly LayerMetric[] = LAYER_METRIC_SPECS.map((spec) => spec.name);

export function layerMetric(name: LayerMetric): LayerMetricSpec<LayerMetric> {
  return LAYER_METRIC_SPECS.find((spec) => spec.name === name)!;
}

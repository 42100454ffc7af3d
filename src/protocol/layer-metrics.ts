// The per-layer metrics, one object each: how its value is read off a layer's stats, and how the
// dashboard labels, formats and ranks it. The same object serves the layer overview (a column; the
// order of LayerRow.values on the wire is the registry order) and the layer × step heatmap (a grid),
// so adding a metric here adds it everywhere it is flagged for.
import type { OperandStats, ScaleHistogram, WgradError } from './telemetry.js';

/**
 * What the overview's metrics read off a stats record: a whole record has it, and so has the store's
 * headline of one (the fields without the histograms and sketches that decoding costs).
 */
export interface OverviewFields {
  operands: readonly Pick<OperandStats, 'saturatedFrac' | 'flushedFrac' | 'sqnrDb'>[];
  wgradError?: Pick<WgradError, 'relErr' | 'alignment' | 'lag1Cos'>;
}

/**
 * What the heatmap's metrics read off a stats record: the overview's fields, the step, and each
 * operand's scale histogram (the scale shift). A whole record has it, and so has the store's view
 * of a stored row, whose counts are a typed array read in place.
 */
export interface GridFields extends OverviewFields {
  step: number;
  operands: readonly (OverviewFields['operands'][number] & { histogram: Pick<ScaleHistogram, 'minExp'> & { counts: ArrayLike<number> } })[];
}

/** A layer's newest stats record of each GEMM that has one, and its Wgrad record among them. */
export interface LatestLayerStats<Stats = GridFields> {
  records: readonly Stats[];
  wgrad: Stats | undefined;
}

/** `Stats` is what `ofRecord` reads: a whole record, or for the overview's metrics the fields they need. */
export interface LayerMetricSpec<Name extends string = string, Stats = GridFields> {
  /** Key in the dashboard's state, the wire and the CSV header. */
  name: Name;
  /** Short label for column headers. */
  label: string;
  /** Long label for the heatmap's menu and notes. */
  title: string;
  unit: '' | '%' | 'dB';
  /** Whether larger values are worse (error, saturation), smaller ones (SQNR), or any change from zero (a shift). */
  worse: 'higher' | 'lower' | 'larger-change';
  /** Only wgrad records carry it (it comes from the Wgrad error measurement). */
  wgradOnly: boolean;
  format(value: number | null): string;
  /** The value on one stats record; `previous` is the same layer and GEMM one stats step before (a change needs it). Null where the record does not say. */
  ofRecord(record: Stats, previous?: Stats): number | null;
  /** The layer overview's value: the worst over the layer's newest records (its Wgrad record for wgrad-only metrics). */
  of(latest: LatestLayerStats<Stats>): number | null;
  /** A column of the layer overview. */
  overview: boolean;
  /** A metric of the layer × step heatmap. */
  grid: boolean;
}

/** A number in `digits` significant digits, exponent form when very large or small; '—' when absent. */
export function formatNumber(value: number | null, digits = 3): string {
  if (value === null || !Number.isFinite(value)) return '—';
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e5 || abs < 1e-3)) return value.toExponential(2);
  return Number(value.toPrecision(digits)).toString();
}

/** Mean unbiased block exponent over the record's operands (NaN blocks left out); null without blocks. */
export function meanExponent(record: Pick<GridFields, 'operands'>): number | null {
  // Plain loops, no closures or arrays: the host's alerts read this off every layerStats record.
  let sum = 0;
  let count = 0;
  for (const { histogram } of record.operands) {
    const { counts, minExp } = histogram;
    for (let i = 0; i < counts.length; i++) {
      sum += counts[i]! * (minExp + i);
      count += counts[i]!;
    }
  }
  return count > 0 ? sum / count : null;
}

/** The worst operand of the record: the largest fraction, as a percentage; null without operands. */
function worstPercent(record: OverviewFields, fraction: (operand: OverviewFields['operands'][number]) => number): number | null {
  let worst = -Infinity;
  for (const operand of record.operands) worst = Math.max(worst, fraction(operand) * 100);
  return record.operands.length === 0 ? null : worst;
}

/** The lowest SQNR of the record's operands that know theirs (worstOf of them, 'lower'), without an array: the host's alerts read it off every layerStats record. */
function lowestSqnr(record: OverviewFields): number | null {
  let lowest: number | null = null;
  for (const { sqnrDb } of record.operands) if (sqnrDb !== null && (lowest === null || sqnrDb < lowest)) lowest = sqnrDb;
  return lowest;
}

/** How bad a value of a metric that is `worse` is: larger is worse (worst-first order, shading). */
export const badness = (value: number, worse: LayerMetricSpec['worse']): number => (worse === 'higher' ? value : worse === 'lower' ? -value : Math.abs(value));

/** Whether a known `value` is worse than `worst` (null: none known yet); an equal one is not (the first of equals stays). */
function isWorse(value: number, worst: number | null, worse: LayerMetricSpec['worse']): boolean {
  return worst === null || badness(value, worse) > badness(worst, worse);
}

/**
 * Which of `count` values (`valueOf(i)`, null where unknown) is the worst (largest, smallest, or
 * farthest from zero; the first of equals); null if none is known.
 */
export function worstIndex(count: number, valueOf: (index: number) => number | null, worse: LayerMetricSpec['worse']): number | null {
  let worst: number | null = null;
  let at: number | null = null;
  for (let i = 0; i < count; i++) {
    const value = valueOf(i);
    if (value !== null && isWorse(value, worst, worse)) {
      worst = value;
      at = i;
    }
  }
  return at;
}

/**
 * The worst of a metric's values on `records`; null if none is known. A loop, not an array of the
 * values: a stats step's overview takes it 6 times for each of up to 30,000 layers.
 */
function worstOn<Stats>(records: readonly Stats[], ofRecord: (record: Stats) => number | null, worse: LayerMetricSpec['worse']): number | null {
  let worst: number | null = null;
  for (let i = 0; i < records.length; i++) {
    const value = ofRecord(records[i]!);
    if (value !== null && isWorse(value, worst, worse)) worst = value;
  }
  return worst;
}

type MetricInput<Name extends string, Stats, Overview extends boolean, Grid extends boolean> = Omit<LayerMetricSpec<Name, Stats>, 'of' | 'format' | 'overview' | 'grid'> & {
  overview: Overview;
  grid: Grid;
};

const metric = <const Name extends string, Stats, const Overview extends boolean, const Grid extends boolean>(
  spec: MetricInput<Name, Stats, Overview, Grid>,
): LayerMetricSpec<Name, Stats> & { overview: Overview; grid: Grid } => ({
  ...spec,
  format: (value) => formatNumber(value),
  of: (latest) => (spec.wgradOnly ? (latest.wgrad ? spec.ofRecord(latest.wgrad) : null) : worstOn(latest.records, spec.ofRecord, spec.worse)),
});

export const METRIC_SPECS = [
  metric({ name: 'wgradRelErr', label: 'Wgrad rel. error', title: 'Wgrad relative error', unit: '', worse: 'higher', wgradOnly: true, overview: true, grid: true, ofRecord: (r: OverviewFields) => r.wgradError?.relErr ?? null }),
  metric({ name: 'alignment', label: 'Alignment', title: 'Wgrad alignment', unit: '', worse: 'lower', wgradOnly: true, overview: true, grid: false, ofRecord: (r: OverviewFields) => r.wgradError?.alignment ?? null }),
  metric({ name: 'saturatedPct', label: 'Saturated', title: 'Saturated %', unit: '%', worse: 'higher', wgradOnly: false, overview: true, grid: true, ofRecord: (r: OverviewFields) => worstPercent(r, (o) => o.saturatedFrac) }),
  metric({ name: 'flushedPct', label: 'Flushed', title: 'Flushed %', unit: '%', worse: 'higher', wgradOnly: false, overview: true, grid: true, ofRecord: (r: OverviewFields) => worstPercent(r, (o) => o.flushedFrac) }),
  metric({
    name: 'sqnrDb',
    label: 'SQNR',
    title: 'SQNR (dB)',
    unit: 'dB',
    worse: 'lower',
    wgradOnly: false,
    overview: true,
    grid: true,
    ofRecord: lowestSqnr,
  }),
  metric({ name: 'lag1Cos', label: 'Lag-1 error corr.', title: 'Lag-1 error correlation', unit: '', worse: 'higher', wgradOnly: true, overview: true, grid: true, ofRecord: (r: OverviewFields) => r.wgradError?.lag1Cos ?? null }),
  metric({
    name: 'scaleShift',
    label: 'Scale shift',
    title: 'Scale shift (Δ mean exponent)',
    unit: '',
    worse: 'larger-change',
    wgradOnly: false,
    overview: false,
    grid: true,
    ofRecord: (record: GridFields, previous?: GridFields) => {
      const now = meanExponent(record);
      const before = previous ? meanExponent(previous) : null;
      return now === null || before === null ? null : now - before;
    },
  }),
] as const;

type Spec = (typeof METRIC_SPECS)[number];
export type MetricName = Spec['name'];
/** The layer overview's columns, in LayerRow.values order. */
export type LayerMetric = Extract<Spec, { overview: true }>['name'];
/** The layer × step heatmap's metrics. */
export type GridMetric = Extract<Spec, { grid: true }>['name'];

/** The overview's metrics read only OverviewFields (the store's headlines give no more). */
export const LAYER_METRIC_SPECS: readonly LayerMetricSpec<LayerMetric, OverviewFields>[] = METRIC_SPECS.filter((spec): spec is Extract<Spec, { overview: true }> => spec.overview);
export const LAYER_METRICS: readonly LayerMetric[] = LAYER_METRIC_SPECS.map((spec) => spec.name);
export const GRID_METRICS: readonly GridMetric[] = METRIC_SPECS.filter((spec): spec is Extract<Spec, { grid: true }> => spec.grid).map((spec) => spec.name);

/** The registry's object for a metric name (overview or heatmap). */
export function layerMetric<Name extends MetricName>(name: Name): LayerMetricSpec<Name> {
  return METRIC_SPECS.find((spec) => spec.name === name)! as LayerMetricSpec<Name>;
}

// Which layer moved first: every (layer, GEMM) keeps a running mean and spread of its metrics over
// the stats steps, and the step at which one left that running range is remembered. When the loss
// spikes or the run diverges, the earliest departure in the stats steps just before the event names
// the layer and GEMM to look at first (stats arrive in model order, so ties go to the earlier layer).
import type { GemmKind } from '../protocol/config.js';
import type { LayerStatsRecord } from '../protocol/telemetry.js';
import { layerMetric, meanExponent, type GridMetric } from '../protocol/layer-metrics.js';

interface Watched {
  label: string;
  /** The layer heatmap metric that shows it. */
  grid: GridMetric;
  value(record: LayerStatsRecord): number | null;
  /** A move smaller than this never counts, however steady the metric was (noise floor). */
  floor: number;
}

const WATCHED: Watched[] = [
  { label: 'Wgrad relative error', grid: 'wgradRelErr', value: layerMetric('wgradRelErr').ofRecord, floor: 0.05 },
  { label: 'saturated %', grid: 'saturatedPct', value: layerMetric('saturatedPct').ofRecord, floor: 0.5 },
  { label: 'flushed %', grid: 'flushedPct', value: layerMetric('flushedPct').ofRecord, floor: 2 },
  { label: 'SQNR (dB)', grid: 'sqnrDb', value: layerMetric('sqnrDb').ofRecord, floor: 3 },
  { label: 'mean scale exponent', grid: 'scaleShift', value: meanExponent, floor: 1 },
];

/** Running-range rule: EMA weight per stats step, how many spreads out counts, observations before judging. */
const RANGE = { weight: 0.7, sigmas: 5, warmup: 4 } as const;
/** Departures kept per run (the newest). */
const KEPT = 512;

export interface Departure {
  step: number;
  layer: string;
  gemm: GemmKind;
  metric: string;
  gridMetric: GridMetric;
  value: number;
  mean: number;
}

interface Running {
  mean: number;
  variance: number;
  count: number;
  out: boolean;
}

export class DepartureTracker {
  /**
   * Per layer, per GEMM, the running range of each WATCHED metric (same index; undefined until it
   * has a value). Found by the layer name as it came: every layerStats record passes here, and a
   * key string built per metric and record cost more than the rest of the tracking.
   */
  private readonly running = new Map<string, Partial<Record<GemmKind, (Running | undefined)[]>>>();
  private readonly departures: Departure[] = [];

  observe(record: LayerStatsRecord): void {
    let layer = this.running.get(record.layer);
    if (!layer) this.running.set(record.layer, (layer = {}));
    const states = (layer[record.gemm] ??= new Array<Running | undefined>(WATCHED.length));
    for (let i = 0; i < WATCHED.length; i++) {
      const watched = WATCHED[i]!;
      const value = watched.value(record);
      if (value === null || !Number.isFinite(value)) continue;
      let state = states[i];
      if (!state) states[i] = state = { mean: value, variance: 0, count: 0, out: false };
      const deviation = value - state.mean;
      const outside = state.count >= RANGE.warmup && Math.abs(deviation) > Math.max(RANGE.sigmas * Math.sqrt(state.variance), watched.floor);
      if (outside && !state.out) {
        this.departures.push({ step: record.step, layer: record.layer, gemm: record.gemm, metric: watched.label, gridMetric: watched.grid, value, mean: state.mean });
        if (this.departures.length > KEPT) this.departures.shift();
      }
      state.out = outside;
      if (outside) continue; // an excursion must not widen the range it is measured against
      state.mean += (1 - RANGE.weight) * deviation;
      state.variance = RANGE.weight * (state.variance + (1 - RANGE.weight) * deviation * deviation);
      state.count++;
    }
  }

  /** The earliest departure at a step in [from, to], or undefined. */
  first(from: number, to: number): Departure | undefined {
    let best: Departure | undefined;
    for (const departure of this.departures) {
      if (departure.step < from || departure.step > to) continue;
      if (!best || departure.step < best.step) best = departure;
    }
    return best;
  }
}

export function describeDeparture(departure: Departure): string {
  const fmt = (v: number) => String(Number(v.toPrecision(3)));
  return `${departure.layer} (${departure.gemm}): ${departure.metric} ${fmt(departure.value)} against a running ${fmt(departure.mean)} at step ${departure.step}`;
}

// Scale-exponent histograms on a canvas: one or more series (A and B when comparing) over a shared
// exponent axis, bars side by side as fractions of each series' blocks so different sizes compare fairly.
import { MAX_SCALE_EXP, type ScaleHistogram } from '../../src/protocol/telemetry.js';
import type { Theme } from '../dashboard/theme.js';

export interface Series {
  histogram: ScaleHistogram;
  color: string;
}

export interface HistogramOptions {
  /** Draw exponent labels under the bars and a median tick (large chart) or nothing (sparkline). */
  axis: boolean;
  /** Exponent range to draw; defaults to the union of the series. */
  range?: [number, number];
  /**
   * Dashed vertical lines, labelled above the bars (axis charts only): through the middle of an
   * exponent's bar, or at its left edge with `edge` (a threshold that starts there).
   */
  markers?: { exp: number; label: string; color: string; edge?: boolean }[];
}

export function exponentRange(series: readonly Series[]): [number, number] | null {
  const filled = series.filter((s) => s.histogram.counts.length > 0);
  if (filled.length === 0) return null;
  return [Math.min(...filled.map((s) => s.histogram.minExp)), Math.max(...filled.map((s) => s.histogram.minExp + s.histogram.counts.length - 1))];
}

/**
 * The lowest E8M0 exponent, where a block of zeros lands (and one whose values are all under 2^-125).
 * A model's unused embedding rows, and their optimizer states, put many blocks there.
 */
export const FLOOR_EXP = -MAX_SCALE_EXP;

/**
 * The exponents a column of sparklines shares: every non-empty bin but the floor's, which would
 * stretch a table's axis from about -30 to -127 and squeeze every other histogram to a sliver.
 */
export function sparklineRange(series: readonly Series[]): [number, number] | null {
  let low = Infinity;
  let high = -Infinity;
  for (const { histogram } of series) {
    histogram.counts.forEach((count, i) => {
      const exp = histogram.minExp + i;
      if (count === 0 || exp === FLOOR_EXP) return;
      low = Math.min(low, exp);
      high = Math.max(high, exp);
    });
  }
  return low <= high ? [low, high] : null;
}

/** Sizes the canvas backing store to its CSS box at the device pixel ratio and returns a 2-D context in CSS pixels. */
function prepare(canvas: HTMLCanvasElement): { g: CanvasRenderingContext2D; width: number; height: number } | null {
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  const g = canvas.getContext('2d');
  if (!g || width === 0 || height === 0) return null;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  return { g, width, height };
}

export function drawHistogram(canvas: HTMLCanvasElement, series: readonly Series[], theme: Theme, options: HistogramOptions): void {
  const surface = prepare(canvas);
  const range = options.range ?? exponentRange(series);
  if (!surface || !range) return;
  const { g, width, height } = surface;
  const bottom = options.axis ? height - 18 : height;
  const top = options.axis ? (options.markers?.length ? 18 : 6) : 1;
  const bins = range[1] - range[0] + 1;
  const binWidth = width / bins;
  const fractions = series.map(({ histogram }) => {
    const total = histogram.counts.reduce((sum, count) => sum + count, 0);
    return (exp: number) => (total === 0 ? 0 : (histogram.counts[exp - histogram.minExp] ?? 0) / total);
  });
  let peak = 0;
  for (let exp = range[0]; exp <= range[1]; exp++) for (const fraction of fractions) peak = Math.max(peak, fraction(exp));
  if (peak === 0) return;

  // Several series share each exponent's slot side by side; a gap separates neighbouring exponents.
  const gap = bins > 40 ? 0 : Math.min(4, binWidth * 0.15);
  const barWidth = (binWidth - gap) / series.length;
  series.forEach(({ color }, index) => {
    g.fillStyle = color;
    for (let exp = range[0]; exp <= range[1]; exp++) {
      const value = fractions[index](exp);
      if (value === 0) continue;
      const barHeight = Math.max(1, ((bottom - top) * value) / peak);
      g.fillRect((exp - range[0]) * binWidth + gap / 2 + index * barWidth, bottom - barHeight, Math.max(1, barWidth), barHeight);
    }
  });

  if (!options.axis) return;
  g.strokeStyle = theme.grid;
  g.beginPath();
  g.moveTo(0, bottom + 0.5);
  g.lineTo(width, bottom + 0.5);
  g.stroke();
  g.font = '11px var(--vscode-font-family), sans-serif';
  g.textBaseline = 'top';
  g.setLineDash([4, 3]);
  for (const marker of options.markers ?? []) {
    if (marker.exp < range[0] || marker.exp > range[1] + 1) continue;
    const x = Math.round((marker.exp - range[0] + (marker.edge ? 0 : 0.5)) * binWidth) + 0.5;
    g.strokeStyle = marker.color;
    g.beginPath();
    g.moveTo(x, top - 4);
    g.lineTo(x, bottom);
    g.stroke();
    g.fillStyle = marker.color;
    g.textAlign = x > width - 120 ? 'right' : 'left';
    g.fillText(marker.label, x + (g.textAlign === 'right' ? -4 : 4), 2);
  }
  g.setLineDash([]);
  g.fillStyle = theme.muted;
  g.textAlign = 'center';
  g.textBaseline = 'top';
  const step = Math.max(1, Math.ceil(bins / Math.max(1, Math.floor(width / 36))));
  for (let exp = range[0]; exp <= range[1]; exp += step) g.fillText(String(exp), (exp - range[0] + 0.5) * binWidth, bottom + 3);
}

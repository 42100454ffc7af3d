// Min/max decimation for line charts: per horizontal bucket keep the first, lowest, highest and last
// point, so spikes survive (a loss spike must not vanish when 10,000 steps meet 800 pixels).

export interface Point {
  x: number;
  y: number;
}

/** Points with null y are dropped. `buckets` ≈ the chart's width in pixels. */
export function decimateMinMax(xs: readonly number[], ys: readonly (number | null)[], buckets: number): Point[] {
  const points: Point[] = [];
  const n = xs.length;
  if (n === 0) return points;
  if (n <= buckets * 4) {
    for (let i = 0; i < n; i++) if (ys[i] !== null && ys[i] !== undefined) points.push({ x: xs[i]!, y: ys[i]! });
    return points;
  }
  const x0 = xs[0]!;
  const width = (xs[n - 1]! - x0) / buckets || 1;
  let i = 0;
  while (i < n) {
    const bucket = Math.floor((xs[i]! - x0) / width);
    let first = -1;
    let last = -1;
    let min = -1;
    let max = -1;
    for (; i < n && Math.min(Math.floor((xs[i]! - x0) / width), buckets - 1) <= bucket; i++) {
      const y = ys[i];
      if (y === null || y === undefined) continue;
      if (first < 0) first = i;
      last = i;
      if (min < 0 || y < ys[min]!) min = i;
      if (max < 0 || y > ys[max]!) max = i;
    }
    if (first < 0) continue;
    for (const k of [...new Set([first, min, max, last])].sort((a, b) => a - b)) points.push({ x: xs[k]!, y: ys[k]! });
  }
  return points;
}

/** The points with min ≤ x ≤ max plus one neighbour each side (so lines reach the chart edges); xs ascending. */
export function sliceToRange<T>(xs: readonly number[], ys: readonly T[], min: number, max: number): { xs: number[]; ys: T[] } {
  const first = Math.max(0, lowerBound(xs, min) - 1);
  const end = Math.min(xs.length, lowerBound(xs, max, true) + 1);
  return { xs: xs.slice(first, end), ys: ys.slice(first, end) };
}

/** First index with xs[i] ≥ value (or > value when `after`). */
function lowerBound(xs: readonly number[], value: number, after = false): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! < value || (after && xs[mid]! === value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

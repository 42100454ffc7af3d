// The part of a series inside a zoomed x range (min/max decimation itself is in live-line.ts).

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

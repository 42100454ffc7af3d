// An outlier-robust y range for line charts: one loss spike to 12 must not squash every other run
// into a thin band at 3. The range spans the 2nd..98th percentile of the visible values plus a
// quarter of that span each side, clamped to the data's own extent, so a clean chart is unchanged
// and a spike runs off the top (drawn clipped) instead of setting the scale. On a log axis the same
// rule runs on log10 values.

const TAIL = 0.02;
const PAD = 0.25;

/** Reused between calls: a live chart asks on every frame. */
let scratch = new Float64Array(1024);

/** The range of the values of every series together (null and non-finite values skipped). */
export function robustRange(series: readonly (readonly (number | null)[])[], logScale: boolean): [number, number] | null {
  const total = series.reduce((sum, values) => sum + values.length, 0);
  if (scratch.length < total) scratch = new Float64Array(Math.max(total, 2 * scratch.length));
  const finite = scratch;
  let count = 0;
  for (const values of series) {
    for (let i = 0; i < values.length; i++) {
      const value = values[i];
      if (value === null || value === undefined || !Number.isFinite(value)) continue;
      if (!logScale) finite[count++] = value;
      else if (value > 0) finite[count++] = Math.log10(value);
    }
  }
  return rangeOf(finite, count, logScale);
}

function rangeOf(finite: Float64Array, count: number, logScale: boolean): [number, number] | null {
  if (count < 2) return null;
  // Four order statistics by selection, O(n): a live chart asks on every frame, a sort would be O(n log n).
  const last = count - 1;
  const rank = (q: number) => Math.min(last, Math.max(0, Math.round(q * last)));
  const lo = select(finite, rank(TAIL), 0, last);
  const hi = select(finite, rank(1 - TAIL), rank(TAIL), last);
  const least = select(finite, 0, 0, rank(TAIL));
  const most = select(finite, last, rank(1 - TAIL), last);
  const span = hi - lo || Math.abs(hi) * 0.1 || 1;
  const range: [number, number] = [Math.max(least, lo - PAD * span), Math.min(most, hi + PAD * span)];
  if (!(range[1] > range[0])) return null;
  return logScale ? [10 ** range[0], 10 ** range[1]] : range;
}

/**
 * The k-th smallest of values[left..right] (Hoare's quickselect, median-of-three pivot), leaving
 * smaller values left of k and larger ones right of it, so later calls can narrow their range.
 */
function select(values: Float64Array, k: number, left: number, right: number): number {
  while (right > left) {
    const mid = (left + right) >>> 1;
    const pivot = Math.max(Math.min(values[left]!, values[mid]!), Math.min(Math.max(values[left]!, values[mid]!), values[right]!));
    let i = left;
    let j = right;
    while (i <= j) {
      while (values[i]! < pivot) i++;
      while (values[j]! > pivot) j--;
      if (i <= j) {
        const swap = values[i]!;
        values[i++] = values[j]!;
        values[j--] = swap;
      }
    }
    if (k <= j) right = j;
    else if (k >= i) left = i;
    else break;
  }
  return values[k]!;
}

/** Zoom a [min, max] range by `factor` (< 1 zooms in) around `at`. */
export function zoomRange(range: [number, number], at: number, factor: number): [number, number] {
  return [at - (at - range[0]) * factor, at + (range[1] - at) * factor];
}

// An outlier-robust y range for line charts: one loss spike to 12 must not squash every other run
// into a thin band at 3. The range spans the 2nd..98th percentile of the visible values plus a
// quarter of that span each side, clamped to the data's own extent, so a clean chart is unchanged
// and a spike runs off the top (drawn clipped) instead of setting the scale. On a log axis the same
// rule runs on log10 values.

const TAIL = 0.02;
const PAD = 0.25;

export function robustRange(values: Iterable<number | null>, logScale: boolean): [number, number] | null {
  const finite: number[] = [];
  for (const value of values) {
    if (value === null || !Number.isFinite(value)) continue;
    if (logScale) {
      if (value > 0) finite.push(Math.log10(value));
    } else finite.push(value);
  }
  if (finite.length < 2) return null;
  finite.sort((a, b) => a - b);
  const at = (q: number) => finite[Math.min(finite.length - 1, Math.max(0, Math.round(q * (finite.length - 1))))]!;
  const lo = at(TAIL);
  const hi = at(1 - TAIL);
  const span = hi - lo || Math.abs(hi) * 0.1 || 1;
  const range: [number, number] = [Math.max(finite[0]!, lo - PAD * span), Math.min(finite[finite.length - 1]!, hi + PAD * span)];
  if (!(range[1] > range[0])) return null;
  return logScale ? [10 ** range[0], 10 ** range[1]] : range;
}

/** Zoom a [min, max] range by `factor` (< 1 zooms in) around `at`. */
export function zoomRange(range: [number, number], at: number, factor: number): [number, number] {
  return [at - (at - range[0]) * factor, at + (range[1] - at) * factor];
}

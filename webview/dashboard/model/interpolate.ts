// Reading a curve between its points: where a loss curve crosses a level, and its value at an x it
// was not sampled at. Both assume xs ascending and skip null (non-finite) points.

/** The first x at which the curve reaches `level` or below, linearly interpolated; null if never. */
export function firstCrossingBelow(xs: readonly number[], ys: readonly (number | null)[], level: number): number | null {
  let prevX = Number.NaN;
  let prevY = Number.NaN;
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (y === null || y === undefined) continue;
    const x = xs[i]!;
    if (y <= level) {
      if (Number.isNaN(prevY) || prevY === y) return x;
      return prevX + ((prevY - level) / (prevY - y)) * (x - prevX);
    }
    prevX = x;
    prevY = y;
  }
  return null;
}

/** The curve's value at each of `at` (ascending), linear between points; null outside its range. */
export function valuesAt(xs: readonly number[], ys: readonly (number | null)[], at: readonly number[]): (number | null)[] {
  const out: (number | null)[] = new Array(at.length).fill(null);
  let j = 0;
  for (let i = 0; i < at.length; i++) {
    const x = at[i]!;
    while (j + 1 < xs.length && xs[j + 1]! < x) j++;
    const x0 = xs[j];
    const x1 = xs[j + 1];
    const y0 = ys[j];
    if (x0 === undefined || y0 === null || y0 === undefined) continue;
    if (x === x0) out[i] = y0;
    else if (x1 !== undefined && x > x0 && x <= x1) {
      const y1 = ys[j + 1];
      if (y1 !== null && y1 !== undefined) out[i] = y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
    }
  }
  return out;
}

/** y − baseline(x) at each point: the loss gap to a baseline run (null where either is unknown). */
export function gapTo(baseXs: readonly number[], baseYs: readonly (number | null)[], xs: readonly number[], ys: readonly (number | null)[]): (number | null)[] {
  const base = valuesAt(baseXs, baseYs, xs);
  return ys.map((y, i) => (y === null || base[i] === null ? null : y - base[i]!));
}

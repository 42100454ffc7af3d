// A chart line kept up to date as a live run appends points: optional EMA smoothing, then min/max
// decimation (per horizontal bucket the first, lowest, highest and last point, so spikes survive).
// The bucket grid is stable while the data grow: its width comes from a fixed ladder (powers of
// 2^¼) and only moves up a rung when the data outgrow it, so a one-step delta re-reads only the
// newest bucket instead of re-smoothing and re-decimating 10,000 points.

export interface Point {
  x: number;
  y: number;
}

/** Bucket widths are 2^(k/4): one rung is 19 % wider, so a grid holds between 84 % and 100 % of the buckets asked for. */
const RUNGS_PER_OCTAVE = 4;

function ladderWidth(span: number, buckets: number): number {
  const least = span / Math.max(1, buckets - 1);
  if (!(least > 0)) return 1;
  return 2 ** (Math.ceil(Math.log2(least) * RUNGS_PER_OCTAVE - 1e-9) / RUNGS_PER_OCTAVE);
}

export class LiveLine {
  /** The drawn points (a chart's dataset data): appended and trimmed in place, never replaced. */
  readonly points: Point[] = [];
  private xs: readonly number[] = [];
  private ys: readonly (number | null)[] = [];
  private smoothed: (number | null)[] = [];
  /** Source points consumed so far. */
  private done = 0;
  /** EMA state after `done` points (debiased like TensorBoard's). */
  private average = 0;
  private correction = 1;
  /** Decimation grid: origin and bucket width; 0 while the line is short enough to draw every point. */
  private x0 = 0;
  private width = 0;
  /** The newest bucket: its index, first source index, and how many points it put in `points`. */
  private lastBucket = -1;
  private lastStart = 0;
  private lastCount = 0;

  /** `buckets` ≈ the chart's width in pixels / 2; `weight`: EMA weight in [0, 1), 0 draws the values as they are. */
  constructor(
    readonly buckets: number,
    readonly weight = 0,
  ) {
    if (!(weight >= 0 && weight < 1)) throw new RangeError(`EMA weight must be in [0, 1), got ${weight}`);
  }

  /** The values drawn, after smoothing (for export and the y range); the source array when not smoothed. */
  get values(): readonly (number | null)[] {
    return this.weight > 0 ? this.smoothed : this.ys;
  }

  /**
   * Catch up with `xs`/`ys` (x ascending). Arrays that only grew since the last call cost the new
   * points plus the newest bucket; other arrays, or data outgrowing the grid, rebuild the line.
   */
  sync(xs: readonly number[], ys: readonly (number | null)[]): this {
    const grown = xs === this.xs && ys === this.ys && xs.length >= this.done;
    if (!grown) this.reset(xs, ys);
    const n = xs.length;
    if (n === this.done) return this;
    this.smooth(n);
    if (this.width === 0 && n > this.buckets * 4) {
      this.width = ladderWidth(xs[n - 1]! - xs[0]!, this.buckets);
      this.x0 = xs[0]!;
      this.points.splice(0, this.points.length);
      this.lastBucket = -1;
      this.lastStart = 0;
      this.lastCount = 0;
    } else if (this.width > 0 && (xs[n - 1]! - this.x0) / this.width >= this.buckets) {
      this.reset(xs, ys);
      return this.sync(xs, ys);
    }
    if (this.width === 0) this.appendEvery(this.done, n);
    else this.decimateFrom(n);
    this.done = n;
    return this;
  }

  private reset(xs: readonly number[], ys: readonly (number | null)[]): void {
    this.xs = xs;
    this.ys = ys;
    this.smoothed = [];
    this.done = 0;
    this.average = 0;
    this.correction = 1;
    this.width = 0;
    this.points.splice(0, this.points.length);
    this.lastBucket = -1;
    this.lastStart = 0;
    this.lastCount = 0;
  }

  private smooth(n: number): void {
    if (this.weight === 0) return;
    const { ys, weight } = this;
    for (let i = this.smoothed.length; i < n; i++) {
      const value = ys[i];
      if (value === null || value === undefined) {
        this.smoothed.push(null);
        continue;
      }
      this.average = this.average * weight + (1 - weight) * value;
      this.correction *= weight;
      this.smoothed.push(this.average / (1 - this.correction));
    }
  }

  private appendEvery(from: number, n: number): void {
    const { xs } = this;
    const values = this.values;
    for (let i = from; i < n; i++) {
      const y = values[i];
      if (y !== null && y !== undefined) this.points.push({ x: xs[i]!, y });
    }
  }

  /** Re-read the newest bucket and everything after it. */
  private decimateFrom(n: number): void {
    const { xs, x0, width } = this;
    const ys = this.values;
    // splice with both arguments, not length: Chart.js watches its data arrays (and misreads a one-argument splice).
    this.points.splice(this.points.length - this.lastCount, this.lastCount);
    let i = this.lastBucket < 0 ? 0 : this.lastStart;
    while (i < n) {
      const bucket = Math.floor((xs[i]! - x0) / width);
      const start = i;
      let first = -1;
      let last = -1;
      let min = -1;
      let max = -1;
      for (; i < n && Math.floor((xs[i]! - x0) / width) <= bucket; i++) {
        const y = ys[i];
        if (y === null || y === undefined) continue;
        if (first < 0) first = i;
        last = i;
        if (min < 0 || y < ys[min]!) min = i;
        if (max < 0 || y > ys[max]!) max = i;
      }
      const before = this.points.length;
      if (first >= 0) for (const k of [...new Set([first, min, max, last])].sort((a, b) => a - b)) this.points.push({ x: xs[k]!, y: ys[k]! });
      this.lastBucket = bucket;
      this.lastStart = start;
      this.lastCount = this.points.length - before;
    }
  }
}

/** Min/max decimation of a whole series at once (points with null y are dropped). */
export function decimateMinMax(xs: readonly number[], ys: readonly (number | null)[], buckets: number): Point[] {
  return new LiveLine(buckets).sync(xs, ys).points;
}

// Statistics across seeds, shared by the dashboard's token-overhead table and mxscope-train
// --ablation --seeds: sample mean and sd, a t-based 95 % interval of a mean, and a Welch 95 %
// interval of a difference of means as a percentage of the baseline's mean.

export function meanSd(values: readonly number[]): { mean: number; sd: number } {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const variance = values.length > 1 ? values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1) : 0;
  return { mean, sd: Math.sqrt(variance) };
}

/** 97.5 % quantile of Student's t with `df` degrees of freedom (two-sided 95 %). */
export function t975(df: number): number {
  const table = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086];
  if (!(df >= 1)) return Infinity;
  return df <= table.length ? table[Math.floor(df) - 1]! : 1.96 + 2.4 / df;
}

export interface Interval {
  mean: number;
  lo: number;
  hi: number;
}

/** Mean of `values` with its 95 % confidence interval (t-based); a single value has an infinite one. */
export function meanInterval(values: readonly number[]): Interval {
  const { mean, sd } = meanSd(values);
  const half = values.length > 1 ? (t975(values.length - 1) * sd) / Math.sqrt(values.length) : Infinity;
  return { mean, lo: mean - half, hi: mean + half };
}

/**
 * Extra tokens of `runs` over `baseline` in percent of the baseline's mean, with a 95 % interval
 * (Welch: both sides' seed spread counts; a single baseline run counts as exact).
 */
export function extraPctInterval(runs: readonly number[], baseline: readonly number[]): Interval | null {
  if (runs.length === 0 || baseline.length === 0) return null;
  const a = meanSd(runs);
  const b = meanSd(baseline);
  if (!(b.mean > 0)) return null;
  const va = runs.length > 1 ? a.sd ** 2 / runs.length : 0;
  const vb = baseline.length > 1 ? b.sd ** 2 / baseline.length : 0;
  const se = Math.sqrt(va + vb);
  // Welch–Satterthwaite degrees of freedom.
  const df = se === 0 ? Infinity : (va + vb) ** 2 / ((runs.length > 1 ? va ** 2 / (runs.length - 1) : 0) + (baseline.length > 1 ? vb ** 2 / (baseline.length - 1) : 0));
  const half = runs.length + baseline.length <= 2 ? Infinity : t975(df) * se;
  const diff = a.mean - b.mean;
  const pct = (v: number) => (v / b.mean) * 100;
  return { mean: pct(diff), lo: pct(diff - half), hi: pct(diff + half) };
}

/** True when the interval covers 0: the difference is within seed noise. */
export function indistinguishable(interval: Interval): boolean {
  return interval.lo <= 0 && interval.hi >= 0;
}

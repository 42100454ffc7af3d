// The token-overhead table: for a target validation loss, the tokens each run needed to reach it and
// the extra percentage over a baseline run (the headline metric for FP4 training recipes).
import { firstCrossingBelow } from './interpolate.js';

export interface OverheadRow {
  runId: string;
  /** Tokens at which validation loss first reached the target; null if it has not (yet). */
  tokens: number | null;
  /** (tokens / baseline tokens − 1) · 100; null when either run has not reached the target. */
  extraPct: number | null;
}

export interface ValidationCurve {
  runId: string;
  tokens: readonly number[];
  loss: readonly (number | null)[];
}

export function overheadTable(curves: readonly ValidationCurve[], baselineRunId: string | null, targetLoss: number): OverheadRow[] {
  const reached = curves.map((curve) => ({ runId: curve.runId, tokens: firstCrossingBelow(curve.tokens, curve.loss, targetLoss) }));
  const baseline = reached.find((row) => row.runId === baselineRunId)?.tokens ?? null;
  return reached.map((row) => ({
    ...row,
    extraPct: row.tokens === null || baseline === null || baseline <= 0 ? null : (row.tokens / baseline - 1) * 100,
  }));
}

/**
 * A default target: the highest final validation loss among runs that have one (every run has
 * reached it, so the table is full), or null without validation data.
 */
export function defaultTargetLoss(curves: readonly ValidationCurve[]): number | null {
  let target: number | null = null;
  for (const curve of curves) {
    let best: number | null = null;
    for (const loss of curve.loss) if (loss !== null && (best === null || loss < best)) best = loss;
    if (best !== null && (target === null || best > target)) target = best;
  }
  return target;
}

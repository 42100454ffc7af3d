// mxscope-train --ablation --seeds N: the series' tokens to target across seeds, as the mean with a
// 95 % interval, and the extra tokens over the FP8 baseline with a Welch 95 % interval; a run whose
// interval covers 0 is "not distinguishable from the baseline" (one seed cannot say that).
import { extraPctInterval, indistinguishable, meanInterval } from '../shared/intervals.js';
import { tokensToTarget, type AblationResult } from '../trainer/ablation.js';
import { signedFixed } from '../shared/percent-change.js';

/** `bySeed[s][r]`: seed s, series run r (the baseline first). */
export function formatSeedTable(bySeed: readonly (readonly AblationResult[])[], target: number): string {
  const runs = bySeed[0]?.length ?? 0;
  const tokens = (r: number) => bySeed.map((results) => (results[r] ? tokensToTarget(results[r]!.validation, target) : undefined)).filter((t): t is number => t !== undefined);
  const baseline = tokens(0);
  const signed = (v: number) => `${signedFixed(v)}%`;
  const rows = Array.from({ length: runs }, (_, r) => {
    const values = tokens(r);
    const mean = values.length > 0 ? meanInterval(values) : undefined;
    const extra = r === 0 ? null : extraPctInterval(values, baseline);
    return [
      bySeed[0]![r]!.label,
      `${values.length}/${bySeed.length}`,
      mean === undefined ? 'not reached' : `${Math.round(mean.mean)}${Number.isFinite(mean.hi) ? ` ± ${Math.round((mean.hi - mean.lo) / 2)}` : ''}`,
      extra === null ? (r === 0 ? 'baseline' : 'n/a') : Number.isFinite(extra.hi) ? `${signed(extra.mean)} [${signed(extra.lo)}, ${signed(extra.hi)}]` : signed(extra.mean),
      extra !== null && Number.isFinite(extra.hi) && indistinguishable(extra) ? 'not distinguishable from the baseline' : '',
    ];
  });
  const header = ['run', 'seeds reached', `mean tokens to ${target.toFixed(4)} (95% CI)`, 'extra tokens (95% CI)', 'verdict'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

// Runs that differ only in their seed form a group: their loss is drawn as the mean with a ±1 sd
// band across seeds, and the token-overhead table gives the mean and a 95 % interval, so a recipe's
// effect is read against seed noise instead of one lucky (or unlucky) run.
import type { RunInfo } from '../../../src/protocol/webview.js';
import { meanSd } from '../../../src/shared/intervals.js';

export interface SeedGroup {
  key: string;
  runs: RunInfo[];
}

/** Groups of two or more runs sharing a seed-less config (distinct seeds), in the order first seen. */
export function seedGroups(runs: readonly RunInfo[]): SeedGroup[] {
  const byKey = new Map<string, RunInfo[]>();
  for (const run of runs) {
    if (run.seedGroup === undefined) continue;
    const members = byKey.get(run.seedGroup) ?? [];
    if (!members.some((member) => member.seed === run.seed)) members.push(run);
    byKey.set(run.seedGroup, members);
  }
  return [...byKey].filter(([, members]) => members.length >= 2).map(([key, members]) => ({ key, runs: members }));
}

/** A group's name: its first run's name without the seed. */
export function groupName(group: SeedGroup): string {
  return group.runs[0]!.name.replace(/\s*[·,(]?\s*seed[ =]*\d+\)?/i, '') || group.runs[0]!.name;
}

/** Mean and ±1 sd across curves at the x values all of them have (finite y only). */
export function meanBand(curves: readonly { xs: readonly number[]; ys: readonly (number | null)[] }[]): { xs: number[]; mean: number[]; lo: number[]; hi: number[] } {
  const out = { xs: [] as number[], mean: [] as number[], lo: [] as number[], hi: [] as number[] };
  if (curves.length === 0) return out;
  const maps = curves.map((curve) => new Map(curve.xs.map((x, i) => [x, curve.ys[i] ?? null])));
  for (const x of curves[0]!.xs) {
    const values = maps.map((map) => map.get(x) ?? null);
    if (values.some((v) => v === null || !Number.isFinite(v))) continue;
    const { mean, sd } = meanSd(values as number[]);
    out.xs.push(x);
    out.mean.push(mean);
    out.lo.push(mean - sd);
    out.hi.push(mean + sd);
  }
  return out;
}


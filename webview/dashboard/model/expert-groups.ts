// The experts of a mixture-of-experts block as one row per group: a run shaped like Qwen3-30B-A3B has
// 128 experts per block and projection, thousands of rows that bury its dense layers. A group row
// holds, per metric, the worst value among its experts, so a worst-first table still leads with
// what is worst.
import { badness, layerMetric } from '../../../src/protocol/layer-metrics.js';
import { LAYER_METRICS, type LayerRow } from '../../../src/protocol/webview.js';

/**
 * An expert layer's group: its name with the expert's number as `*`, the first whole-number segment
 * after a segment that names experts (the bridge's `….experts.gate_up_proj.7`, a module list's
 * `….experts.7.w1`); null for any other layer (`….shared_experts.up_proj` has no number).
 */
export function expertGroupOf(layer: string): string | null {
  const parts = layer.split('.');
  const named = parts.findIndex((part) => /expert/i.test(part));
  if (named < 0) return null;
  for (let i = named + 1; i < parts.length; i++) {
    if (/^\d+$/.test(parts[i]!)) return [...parts.slice(0, i), '*', ...parts.slice(i + 1)].join('.');
  }
  return null;
}

export interface ExpertGroup {
  /** The group's name (`….experts.gate_up_proj.*`) and, per metric, its worst expert's value. */
  row: LayerRow;
  experts: LayerRow[];
}

export type OverviewEntry = { layer: LayerRow } | { group: ExpertGroup };

/** The rows with every group of two or more experts as one entry, in the order each first appears. */
export function groupExperts(rows: readonly LayerRow[]): OverviewEntry[] {
  const members = new Map<string, LayerRow[]>();
  for (const row of rows) {
    const group = expertGroupOf(row.layer);
    if (group !== null) members.set(group, [...(members.get(group) ?? []), row]);
  }
  const entries: OverviewEntry[] = [];
  const placed = new Set<string>();
  for (const row of rows) {
    const group = expertGroupOf(row.layer);
    const experts = group === null ? undefined : members.get(group);
    if (group === null || experts === undefined || experts.length < 2) entries.push({ layer: row });
    else if (!placed.has(group)) {
      placed.add(group);
      entries.push({ group: { row: { layer: group, values: LAYER_METRICS.map((_, m) => worstValue(experts, m)) }, experts } });
    }
  }
  return entries;
}

/** How many of `rows` are experts of a group of two or more, and in how many groups. */
export function expertCount(entries: readonly OverviewEntry[]): { experts: number; groups: number } {
  const groups = entries.filter((entry): entry is { group: ExpertGroup } => 'group' in entry);
  return { experts: groups.reduce((sum, { group }) => sum + group.experts.length, 0), groups: groups.length };
}

function worstValue(rows: readonly LayerRow[], metric: number): number | null {
  const worse = layerMetric(LAYER_METRICS[metric]!).worse;
  let worst: number | null = null;
  for (const row of rows) {
    const value = row.values[metric] ?? null;
    if (value !== null && (worst === null || badness(value, worse) > badness(worst, worse))) worst = value;
  }
  return worst;
}

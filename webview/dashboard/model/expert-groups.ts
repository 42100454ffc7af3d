// The experts of a mixture-of-experts block as one row per group: a run shaped like Qwen3-30B-A3B has
// 128 experts per block and projection, thousands of rows that bury its dense layers. A group row
// holds, per metric, the worst value among its experts, so a worst-first table still leads with
// what is worst.
import { layerMetric, worstIndex, type LayerMetricSpec } from '../../../src/protocol/layer-metrics.js';
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

/** Which way each overview column (a metric) is worse. */
export const metricColumns = (column: number): LayerMetricSpec['worse'] => layerMetric(LAYER_METRICS[column]!).worse;

/**
 * The rows with every group of two or more experts as one entry, in the order each first appears;
 * a group's value in each column is the worst of its experts' (`worse` says which way that column
 * is worse: per metric, or one metric's for every compared run).
 */
export function groupExperts(rows: readonly LayerRow[], worse: (column: number) => LayerMetricSpec['worse'] = metricColumns): OverviewEntry[] {
  return grouped<OverviewEntry>(
    rows.map((row) => row.layer),
    (r) => ({ layer: rows[r]! }),
    (name, members) => {
      const experts = members.map((r) => rows[r]!);
      const values = rows[members[0]!]!.values.map((_, c) => worstOf(members, (r) => rows[r]!.values[c] ?? null, worse(c)).value);
      return { group: { row: { layer: name, values }, experts } };
    },
  );
}

/** How many of `rows` are experts of a group of two or more, and in how many groups. */
export function expertCount(entries: readonly OverviewEntry[]): { experts: number; groups: number } {
  const groups = entries.filter((entry): entry is { group: ExpertGroup } => 'group' in entry);
  return { experts: groups.reduce((sum, { group }) => sum + group.experts.length, 0), groups: groups.length };
}

/** How many of `names` are experts of a group of two or more, and in how many groups: from the names alone. */
export function expertsIn(names: readonly string[]): { experts: number; groups: number } {
  const sizes = grouped(names, () => 0, (_, members) => members.length).filter((size) => size > 0);
  return { experts: sizes.reduce((sum, size) => sum + size, 0), groups: sizes.length };
}

export interface GridRow {
  /** A layer, or a group (`….experts.gate_up_proj.*`). */
  name: string;
  /** Per step: the layer's value, or the worst of the group's experts' values. */
  values: (number | null)[];
  /** Per step, the expert whose value a group's row shows (null in a layer's row, or without stats). */
  shownExpert: (string | null)[];
  /** The group's experts (empty for a layer). */
  experts: string[];
}

/** A layer × step grid's rows (model order) with every group of two or more experts as one row. */
export function groupGridRows(layers: readonly string[], values: readonly (number | null)[], columns: number, worse: LayerMetricSpec['worse']): GridRow[] {
  const at = (r: number, c: number) => values[r * columns + c] ?? null;
  const steps = Array.from({ length: columns }, (_, c) => c);
  return grouped<GridRow>(
    layers,
    (r) => ({ name: layers[r]!, values: steps.map((c) => at(r, c)), shownExpert: steps.map(() => null), experts: [] }),
    (name, members) => {
      const worst = steps.map((c) => worstOf(members, (r) => at(r, c), worse));
      return { name, values: worst.map((w) => w.value), shownExpert: worst.map((w) => (w.index === null ? null : layers[w.index]!)), experts: members.map((r) => layers[r]!) };
    },
  );
}

/** Items for `names` in order, a group of two or more experts as one item at its first expert's place. */
function grouped<T>(names: readonly string[], single: (index: number) => T, group: (name: string, members: number[]) => T): T[] {
  const members = new Map<string, number[]>();
  names.forEach((name, index) => {
    const key = expertGroupOf(name);
    if (key !== null) members.set(key, [...(members.get(key) ?? []), index]);
  });
  const items: T[] = [];
  names.forEach((name, index) => {
    const key = expertGroupOf(name);
    const rows = key === null ? undefined : members.get(key);
    if (key === null || rows === undefined || rows.length < 2) items.push(single(index));
    else if (rows[0] === index) items.push(group(key, rows));
  });
  return items;
}

/** The worst value among `indices` (by the metric's badness) and whose it is; nulls are skipped. */
function worstOf(indices: readonly number[], valueOf: (index: number) => number | null, worse: LayerMetricSpec['worse']): { value: number | null; index: number | null } {
  const at = worstIndex(indices.length, (k) => valueOf(indices[k]!), worse);
  return at === null ? { value: null, index: null } : { value: valueOf(indices[at]!), index: indices[at]! };
}

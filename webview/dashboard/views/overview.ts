// Layer overview: every layer × every metric as a table whose cells are shaded by how bad they are
// (a heatmap you can read), sorted worst first by the chosen metric; a click drills into the layer.
// In compare mode: the chosen metric per run and the difference (last run − first run).
import { expertCount, groupExperts, metricColumns, type ExpertGroup, type OverviewEntry } from '../model/expert-groups.js';
import { worstFirst } from '../model/ui-state.js';
import { wgradErrorNote } from '../../../src/protocol/config.js';
import { layerMetric, type LayerMetricSpec } from '../../../src/protocol/layer-metrics.js';
import { LAYER_METRICS, type LayerMetric, type LayerOverview, type LayerRow } from '../../../src/protocol/webview.js';
import { checkbox, dropdown } from '../../ui/toolkit.js';
import { activatable, element, formatNumber, type Context, type View } from '../context.js';
import { controlsWithRunPicker } from '../layer-picker.js';
import { withAlpha } from '../theme.js';

/** Rows rendered at most: worst first, so the ones that matter are always in. */
const MAX_ROWS = 256;

export class OverviewView implements View {
  readonly root = element('div', 'view overview-view');
  private readonly table = element('table', 'grid overview');
  private readonly note = element('p', 'note');
  private csvData: { header: string[]; rows: (string | number | null)[][] } = { header: [], rows: [] };
  /** Shown where the run has experts (single mode): a row per group of experts, or every expert. */
  private readonly grouping: HTMLElement;
  /** Expert groups whose experts are listed under their row (until the view is rebuilt). */
  private readonly expanded = new Set<string>();

  constructor(private readonly ctx: Context) {
    const bar = controlsWithRunPicker(ctx);
    const label = (metric: LayerMetric) => (ctx.state.mode === 'compare' ? `metric: ${layerMetric(metric).label}` : `worst first by ${layerMetric(metric).label}`);
    bar.append(dropdown(LAYER_METRICS.map((metric) => ({ value: metric, label: label(metric) })), ctx.state.overviewMetric, (m) => ctx.update({ overviewMetric: m as LayerMetric }), 'metric'));
    this.grouping = checkbox('Group experts', ctx.state.groupExperts, (groupExperts) => ctx.update({ groupExperts }));
    this.grouping.hidden = true;
    bar.append(this.grouping);
    this.root.append(bar, this.note, this.table);
  }

  update(): void {
    const runs = this.ctx.state.mode === 'compare' ? this.ctx.shownRuns() : this.ctx.shownRuns().slice(0, 1);
    const overviews = runs.map((run) => this.ctx.data.overview.get(run.runId)).filter((o): o is LayerOverview => o !== undefined);
    this.grouping.hidden = true;
    if (overviews.length === 0) {
      this.note.textContent = 'No layer stats yet.';
      this.table.replaceChildren();
      return;
    }
    if (this.ctx.state.mode === 'compare' && overviews.length >= 2) this.renderCompare(overviews);
    else this.renderSingle(overviews[0]!);
  }

  private renderSingle(overview: LayerOverview): void {
    const metric = this.ctx.state.overviewMetric;
    const rows = worstFirst(overview.rows, metric);
    const run = this.ctx.data.run(overview.runId);
    const errorNote = run ? wgradErrorNote(run) : '';
    const ranges = LAYER_METRICS.map((_, m) => range(overview.rows.map((row) => row.values[m] ?? null)));
    const cells: Cells = (tr, row) => {
      row.values.forEach((value, m) => tr.append(this.cell(value, LAYER_METRICS[m]!, ranges[m]!)));
      return tr;
    };
    const { entries, grouped, note } = this.experts(rows, metricColumns, "its worst expert's values; click one to list its experts");
    const shown = grouped ? entries.flatMap((entry) => this.entryRows(entry, cells)) : rows.map((row) => this.layerRow(row, cells));
    this.note.textContent = `${run?.name ?? overview.runId}: ${rows.length} layers${note} at stats step ${overview.step}${shownOf(shown.length, 'worst')}; saturation/flush are the worst operand over all GEMMs, SQNR the lowest. Click a header to sort, a row to open its scales.${errorNote ? ` ${errorNote} (the Wgrad columns).` : ''}`;
    const head = element('tr');
    head.append(element('th', undefined, 'Layer'));
    LAYER_METRICS.forEach((m) => {
      const th = element('th', m === metric ? 'sorted' : undefined, `${layerMetric(m).label}${layerMetric(m).unit ? ` (${layerMetric(m).unit})` : ''}${m === metric ? ' ▼' : ''}`);
      head.append(activatable(th, () => this.ctx.update({ overviewMetric: m }, true), `Sort worst first by ${layerMetric(m).label}`));
    });
    this.table.replaceChildren(head, ...shown.slice(0, MAX_ROWS));
    this.csvData = { header: ['run_id', 'layer', ...LAYER_METRICS], rows: rows.map((row) => [overview.runId, row.layer, ...row.values]) };
  }

  /**
   * The rows' groups of experts (the Group experts box shown where there are any), whether they are
   * drawn grouped, and the note saying so (`perGroup`: what a group's row holds).
   */
  private experts(rows: readonly LayerRow[], worse: (column: number) => LayerMetricSpec['worse'], perGroup: string): { entries: OverviewEntry[]; grouped: boolean; note: string } {
    const entries = groupExperts(rows, worse);
    const { experts, groups } = expertCount(entries);
    const grouped = groups > 0 && this.ctx.state.groupExperts;
    this.grouping.hidden = groups === 0;
    return { entries, grouped, note: groups > 0 ? ` (${experts} experts in ${groups} groups${grouped ? `, a row per group with ${perGroup}` : ''})` : '' };
  }

  private layerRow(row: LayerRow, cells: Cells, className?: string): HTMLTableRowElement {
    const tr = cells(this.rowFor(row.layer), row);
    if (className) tr.classList.add(className);
    return tr;
  }

  /** A layer's row; or a group's row (a click shows or hides its experts), then its experts when shown. */
  private entryRows(entry: OverviewEntry, cells: Cells): HTMLTableRowElement[] {
    if ('layer' in entry) return [this.layerRow(entry.layer, cells)];
    const { group } = entry;
    return [cells(this.groupHeader(group), group.row), ...(this.expanded.has(group.row.layer) ? group.experts.map((row) => this.layerRow(row, cells, 'expert')) : [])];
  }

  /** A group's row with its name cell; a click (or Enter) shows or hides its experts under it. */
  private groupHeader(group: ExpertGroup): HTMLTableRowElement {
    const name = group.row.layer;
    const open = this.expanded.has(name);
    const count = group.experts.length;
    const tr = activatable(element('tr', 'expert-group'), () => {
      if (!this.expanded.delete(name)) this.expanded.add(name);
      this.update();
    }, `${open ? 'Hide' : 'List'} the ${count} experts of ${name}`);
    tr.setAttribute('aria-expanded', String(open));
    tr.append(element('td', 'layer-name', `${open ? '▾' : '▸'} ${name} (${count} experts)`));
    return tr;
  }

  private renderCompare(overviews: LayerOverview[]): void {
    const metric = this.ctx.state.overviewMetric;
    const m = LAYER_METRICS.indexOf(metric);
    const names = overviews.map((o) => this.ctx.data.run(o.runId)?.name ?? o.runId);
    const byLayer = overviews.map((o) => new Map(o.rows.map((row) => [row.layer, row.values[m] ?? null])));
    const first = overviews[0]!;
    // A row's values are the runs' values of the chosen metric; Δ is the last run's minus the first's.
    const rows = largestDiffFirst(first.rows.map((row) => ({ layer: row.layer, values: byLayer.map((map) => map.get(row.layer) ?? null) })), (row) => row);
    const worse = layerMetric(metric).worse;
    const { entries, grouped, note: expertsNote } = this.experts(rows, () => worse, "each run's worst expert");
    // One shading range for all runs, so equal values look equal across columns.
    const shared = range(byLayer.flatMap((map) => [...map.values()]));
    const diffRange = range(rows.map((row) => {
      const d = diffOf(row);
      return d === null ? null : Math.abs(d);
    }));
    const cells: Cells = (tr, row) => {
      row.values.forEach((value) => tr.append(this.cell(value, metric, shared)));
      const d = diffOf(row);
      const diff = element('td', 'num', d === null ? '—' : `${d > 0 ? '+' : ''}${formatNumber(d)}`);
      if (d !== null && diffRange.max > 0) diff.style.backgroundColor = withAlpha(this.ctx.theme.warning, (0.45 * Math.abs(d)) / diffRange.max);
      tr.append(diff);
      return tr;
    };
    const shown = grouped
      ? largestDiffFirst(entries, (entry) => ('layer' in entry ? entry.layer : entry.group.row)).flatMap((entry) => this.entryRows(entry, cells))
      : rows.map((row) => this.layerRow(row, cells));
    const errorNotes = layerMetric(metric).wgradOnly ? this.wgradErrorNotes(overviews) : '';
    this.note.textContent = `${layerMetric(metric).label} per layer${expertsNote}; Δ = ${names[names.length - 1]} − ${names[0]}, largest difference first${shownOf(shown.length, 'largest')}.${errorNotes}`;
    const head = element('tr');
    head.append(element('th', undefined, 'Layer'), ...names.map((name) => element('th', undefined, name)), element('th', 'sorted', 'Δ ▼'));
    this.table.replaceChildren(head, ...shown.slice(0, MAX_ROWS));
    this.csvData = { header: ['layer', ...overviews.map((o) => `${metric} ${o.runId}`), 'diff'], rows: rows.map((row) => [row.layer, ...row.values, diffOf(row)]) };
  }

  /**
   * " A, B: <note>." for each wgradErrorNote the compared runs carry, the runs that share a note
   * named together (a per-rank run and a sampled-rows run each get their own); '' when none has one.
   */
  private wgradErrorNotes(overviews: LayerOverview[]): string {
    const namesByNote = new Map<string, string[]>();
    for (const { runId } of overviews) {
      const run = this.ctx.data.run(runId);
      if (!run) continue;
      const note = wgradErrorNote(run);
      if (note) namesByNote.set(note, [...(namesByNote.get(note) ?? []), run.name]);
    }
    return [...namesByNote].map(([note, names]) => ` ${names.join(', ')}: ${note}.`).join('');
  }

  private rowFor(layer: string): HTMLTableRowElement {
    const tr = activatable(element('tr'), () => this.ctx.update({ layer, tab: 'scales' }, true), `Open ${layer} in Block scales`);
    tr.append(element('td', 'layer-name', layer));
    return tr;
  }

  /** A value cell shaded from clear (best in the column) to the error colour (worst). */
  private cell(value: number | null, metric: LayerMetric, span: { min: number; max: number }): HTMLElement {
    const td = element('td', 'num', layerMetric(metric).format(value));
    if (value !== null && span.max > span.min) {
      const t = (value - span.min) / (span.max - span.min);
      const badness = layerMetric(metric).worse === 'higher' ? t : 1 - t;
      td.style.backgroundColor = withAlpha(this.ctx.theme.error, 0.5 * badness);
    }
    return td;
  }

  csv() {
    return { name: 'layer-overview.csv', ...this.csvData };
  }

  canvas(): null {
    return null;
  }

  destroy(): void {}
}

/** Appends a row's value cells to `tr` (per metric, or per compared run and Δ). */
type Cells = (tr: HTMLTableRowElement, row: LayerRow) => HTMLTableRowElement;

/** Items by the size of their row's Δ, largest first (a stable sort: ties keep their order). */
function largestDiffFirst<T>(items: readonly T[], rowOf: (item: T) => LayerRow): T[] {
  const size = (item: T) => Math.abs(diffOf(rowOf(item)) ?? -Infinity);
  return [...items].sort((x, y) => size(y) - size(x));
}

/** The last run's value minus the first's (compare mode), null where either has none. */
function diffOf(row: LayerRow): number | null {
  const a = row.values[0] ?? null;
  const b = row.values[row.values.length - 1] ?? null;
  return a === null || b === null ? null : b - a;
}

/** ", the <first> 256 shown (Export CSV has every layer)" where the table draws fewer rows than it has. */
function shownOf(rows: number, first: string): string {
  return rows > MAX_ROWS ? `, the ${first} ${MAX_ROWS} shown (Export CSV has every layer)` : '';
}

function range(values: readonly (number | null)[]): { min: number; max: number } {
  let min = Infinity;
  let max = -Infinity;
  for (const value of values) {
    if (value === null) continue;
    if (value < min) min = value;
    if (value > max) max = value;
  }
  return { min, max };
}


// Layer × step heatmap of one per-layer metric (Wgrad relative error, saturation, flush, SQNR,
// lag-1 correlation, scale shift) for one run and GEMM: rows are layers in model order, columns
// stats steps, brighter is worse. It answers "which layer moved first?" before a divergence.
// Hover names the cell's layer, step and value; a click (or Enter) opens that layer's block scales
// at that step; the chosen step (e.g. a divergence) is marked; the layer filter keeps the rows it matches;
// a mixture-of-experts run's experts are a row per group (Group experts), a cell its worst expert's.
import { GEMM_KINDS, wgradErrorNote, type GemmKind } from '../../../src/protocol/config.js';
import { GEMM_OPERANDS } from '../../../src/protocol/telemetry.js';
import { badness, layerMetric, type LayerMetricSpec } from '../../../src/protocol/layer-metrics.js';
import { GRID_METRICS, type GridMetric, type LayerGridMessage } from '../../../src/protocol/webview.js';
import { checkbox, dropdown, textField } from '../../ui/toolkit.js';
import { element, formatNumber, type Context, type View } from '../context.js';
import { paintGrid, type GridGeometry } from '../heatmap-canvas.js';
import { interactiveHeatmap } from '../heatmap-interaction.js';
import { controlsWithRunPicker, panelRunsOrNote } from '../layer-picker.js';
import { stepIndex } from './scales.js';
import { filterLayers } from '../model/ui-state.js';
import { expertsIn, groupGridRows, type GridRow } from '../model/expert-groups.js';

const ROW_PX = { min: 4, max: 14 };

export class LayerHeatmapView implements View {
  readonly root = element('div', 'view layer-heatmap-view');
  private readonly heat = element('canvas', 'heatmap layer-grid');
  private readonly note = element('p', 'note');
  /** The host's grid's rows the layer filter keeps, and what is drawn (experts grouped). */
  private filtered: LayerGridMessage | undefined;
  private shown: LayerGridMessage | undefined;
  /** The drawn rows where experts are grouped (a group row opens its worst expert), else null. */
  private groupedRows: GridRow[] | null = null;
  private geometry: GridGeometry | null = null;
  private grouping: HTMLElement | undefined;

  constructor(private readonly ctx: Context) {
    if (!panelRunsOrNote(ctx, this.root)) return;
    const bar = controlsWithRunPicker(ctx);
    bar.append(
      dropdown(GRID_METRICS.map((m) => ({ value: m, label: layerMetric(m).title })), ctx.state.gridMetric, (m) => {
        const metric = m as GridMetric;
        ctx.update({ gridMetric: metric, ...(layerMetric(metric).wgradOnly ? { gridGemm: 'wgrad' as const } : {}) }, true);
      }, 'heatmap metric'),
      dropdown(this.gemms().map((g) => ({ value: g, label: g })), this.gemm(), (g) => ctx.update({ gridGemm: g as GemmKind }), 'heatmap GEMM'),
      // The same filter as the other per-layer tabs': a mixture-of-experts run has thousands of rows.
      textField(ctx.state.layerFilter, 'filter layers (name or regex)', (layerFilter) => ctx.update({ layerFilter })),
      (this.grouping = checkbox('Group experts', ctx.state.groupExperts, (groupExperts) => ctx.update({ groupExperts }))),
    );
    this.grouping.hidden = true;
    const box = element('section', 'chart-box');
    box.append(element('h3', undefined, 'Layers × stats steps (brighter = worse)'));
    box.append(
      interactiveHeatmap(this.heat, 'Layer by step heatmap', {
        geometry: () => this.geometry,
        describe: (column, row) => this.describe(column, row),
        pick: (column, row) => this.open(column, row),
        move: () => undefined,
      }),
    );
    this.root.append(bar, this.note, box);
  }

  private gemms(): readonly GemmKind[] {
    return layerMetric(this.ctx.state.gridMetric).wgradOnly ? ['wgrad'] : GEMM_KINDS;
  }

  private gemm(): GemmKind {
    return layerMetric(this.ctx.state.gridMetric).wgradOnly ? 'wgrad' : this.ctx.state.gridGemm;
  }

  update(): void {
    const run = this.ctx.shownRuns()[0];
    if (!run) return;
    const { gridMetric } = this.ctx.state;
    const all = this.ctx.grid(run.runId, gridMetric, this.gemm());
    this.filtered = all && filteredRows(all, this.ctx.state.layerFilter);
    const info = layerMetric(gridMetric);
    const filtered = this.filtered;
    if (!filtered) {
      this.note.textContent = 'Loading…';
      return;
    }
    const columns = filtered.steps.length;
    // The groups are counted from the names; their rows are made only when drawn.
    const { experts, groups } = expertsIn(filtered.layers);
    this.grouping!.hidden = groups === 0;
    const groupRows = groups > 0 && this.ctx.state.groupExperts ? groupGridRows(filtered.layers, filtered.values, columns, info.worse) : null;
    this.groupedRows = groupRows;
    const grid = (this.shown = groupRows ? { ...filtered, layers: groupRows.map((row) => row.name), values: groupRows.flatMap((row) => row.values) } : filtered);
    const rows = grid.layers.length;
    const layers = filtered.layers.length;
    const of = layers < all!.layers.length ? ` of ${all!.layers.length}` : '';
    const what = groupRows
      ? `${rows} rows (${layers}${of} layers: ${experts} experts in ${groups} groups, a row per group with its worst expert at each step)`
      : `${layers}${of} layers`;
    const errorNote = wgradErrorNote(run);
    this.note.textContent =
      columns === 0
        ? `${run.name}: no ${grid.gemm} layer stats yet.`
        : `${run.name} · ${grid.gemm} · ${info.title}: ${what} × ${columns} stats steps (${grid.steps[0]}–${grid.steps[columns - 1]}). Hover for values; click a cell to open that layer's block scales at that step.` +
          withoutStatsNote(grid.gemm, grid.withoutStats) +
          (info.wgradOnly && errorNote ? ` ${errorNote}.` : '');
    this.heat.style.height = `${Math.max(160, Math.min(640, rows * Math.min(ROW_PX.max, Math.max(ROW_PX.min, 480 / Math.max(1, rows))) + 24))}px`;
    const { shade } = shades(grid, info.worse);
    const marker = this.ctx.state.step === null || columns === 0 ? null : stepIndex(grid.steps, this.ctx.state.step);
    this.geometry = paintGrid(this.heat, { columns, rows, shade, rowLabels: grid.layers, columnStep: grid.steps, labelWidth: 120 }, this.ctx.theme, marker);
    this.heat.setAttribute('aria-label', `${info.title} of ${rows} layers over ${columns} stats steps, ${run.name}, ${grid.gemm}`);
  }

  private describe(column: number, row: number): string | null {
    const grid = this.shown;
    if (!grid) return null;
    const value = grid.values[row * grid.steps.length + column];
    const label = layerMetric(grid.metric).title;
    const group = this.groupedRows?.[row];
    const name = group && group.experts.length > 0 ? `${group.name} (${group.experts.length} experts)` : grid.layers[row];
    const worst = group?.shownExpert[column];
    return `${name} · ${grid.gemm} · step ${grid.steps[column]} · ${label} ${value === null || value === undefined ? 'no stats' : formatNumber(value)}${worst ? ` (worst: ${worst})` : ''}`;
  }

  /** Opens the cell's layer (a group's: its worst expert at that step) in Block scales at that step. */
  private open(column: number, row: number): void {
    const grid = this.shown;
    if (!grid) return;
    const gemm = grid.gemm;
    const group = this.groupedRows?.[row];
    const layer = group && group.experts.length > 0 ? (group.shownExpert[column] ?? group.experts[0]!) : grid.layers[row]!;
    this.ctx.update({ tab: 'scales', layer, step: grid.steps[column]!, gemm, operand: GEMM_OPERANDS[gemm][0] }, true);
  }

  /** Every layer the filter keeps, experts one by one. */
  csv() {
    const grid = this.filtered;
    const rows: (string | number | null)[][] = [];
    if (grid) grid.layers.forEach((layer, r) => grid.steps.forEach((step, c) => rows.push([grid.runId, layer, grid.gemm, step, grid.values[r * grid.steps.length + c] ?? null])));
    return { name: `layer-heatmap-${this.ctx.state.gridMetric}.csv`, header: ['run_id', 'layer', 'gemm', 'step', this.ctx.state.gridMetric], rows };
  }

  canvas(): HTMLCanvasElement | null {
    return this.shown ? this.heat : null;
  }

  destroy(): void {}
}

/** The layers left out of the rows because the run has no record of this GEMM for them, and why that happens. */
export function withoutStatsNote(gemm: string, names: readonly string[]): string {
  if (names.length === 0) return '';
  const shown = names.slice(0, 3).join(', ') + (names.length > 3 ? ` and ${names.length - 3} more` : '');
  const why = gemm === 'wgrad' ? 'a frozen weight has no Wgrad GEMM' : gemm === 'dgrad' ? 'a layer whose input needs no gradient has no Dgrad GEMM' : 'the layer never ran';
  return ` Not shown, with no ${gemm} stats in this run (${why}): ${shown}.`;
}

/** The grid's rows whose layer the filter (name or regex, as the other per-layer tabs read it) matches. */
function filteredRows(grid: LayerGridMessage, filter: string): LayerGridMessage {
  if (filter === '') return grid;
  const kept = new Set(filterLayers(grid.layers, filter, Infinity).names);
  const columns = grid.steps.length;
  const rows = grid.layers.flatMap((layer, r) => (kept.has(layer) ? [r] : []));
  return { ...grid, layers: rows.map((r) => grid.layers[r]!), values: rows.flatMap((r) => grid.values.slice(r * columns, (r + 1) * columns)) };
}

/** Cell shades in [0, 1], 1 the worst value on the grid (NaN where there are no stats). */
function shades(grid: LayerGridMessage, worse: LayerMetricSpec['worse']): { shade: Float32Array } {
  const rows = grid.layers.length;
  const columns = grid.steps.length;
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of grid.values) {
    if (v === null) continue;
    const b = badness(v, worse);
    if (b < lo) lo = b;
    if (b > hi) hi = b;
  }
  const shade = new Float32Array(rows * columns);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c++) {
      const v = grid.values[r * columns + c];
      shade[c * rows + r] = v === null || v === undefined ? NaN : hi > lo ? (badness(v, worse) - lo) / (hi - lo) : 0;
    }
  }
  return { shade };
}

// Per-layer MX block scales: for the chosen (layer, GEMM, operand), the exact E8M0 exponent
// histogram at a chosen step and the step × exponent heatmap, one panel per shown run (compare mode:
// side by side on the same exponent axis and the same step), with an optional overlay run.
import { binHeatmap, type HeatmapGrid } from '../model/heatmap.js';
import type { LayerDetailMessage, RunInfo } from '../../../src/protocol/webview.js';
import { dropdown } from '../../ui/toolkit.js';
import { barChart } from '../charts.js';
import { chartBox, element, formatNumber, setLegend, type Context, type View } from '../context.js';
import { drawHeatmap, type GridGeometry } from '../heatmap-canvas.js';
import { interactiveHeatmap, type HeatmapHandlers } from '../heatmap-interaction.js';
import { controlsWithRunPicker, currentLayer, layerPicker, panelRunsOrNote } from '../layer-picker.js';
import { withAlpha } from '../theme.js';

interface Panel {
  run: RunInfo;
  chart: ReturnType<typeof barChart>;
  legend: HTMLElement;
  heatmap: HTMLCanvasElement;
  stats: HTMLElement;
  title: HTMLElement;
  /** What the heatmap shows now, for its tooltip and clicks. */
  drawn: { grid: HeatmapGrid; geometry: GridGeometry | null; hi: number; minExp: number; steps: readonly number[] } | null;
}

/** Index of the last step ≤ `step` (steps ascending); the newest when step is null. */
export function stepIndex(steps: readonly number[], step: number | null): number {
  if (step === null) return steps.length - 1;
  let found = -1;
  for (let i = 0; i < steps.length && steps[i]! <= step; i++) found = i;
  return Math.max(0, found);
}

function histogramAt(detail: LayerDetailMessage, index: number): { total: number; fractions: Map<number, number> } {
  const fractions = new Map<number, number>();
  let total = 0;
  for (let e = 0; e < detail.exponents; e++) total += detail.counts[index * detail.exponents + e]!;
  for (let e = 0; e < detail.exponents; e++) {
    const count = detail.counts[index * detail.exponents + e]!;
    if (count > 0) fractions.set(detail.minExp + e, count / total);
  }
  return { total, fractions };
}

export class ScalesView implements View {
  readonly root = element('div', 'view scales-view');
  private readonly panels: Panel[] = [];
  private readonly slider = element('input', 'slider wide');
  private readonly stepLabel = element('span', 'value');
  private csvRows: (string | number | null)[][] = [];

  constructor(private readonly ctx: Context) {
    const runs = panelRunsOrNote(ctx, this.root);
    if (!runs) return;
    const focus = runs[0];
    const top = controlsWithRunPicker(ctx);
    if (ctx.state.mode === 'single' && ctx.data.runs.length > 1) {
      const others = ctx.data.runs.filter((run) => run.runId !== focus.runId).map((run) => ({ value: run.runId, label: `overlay: ${run.name}` }));
      top.append(dropdown([{ value: '', label: 'no overlay' }, ...others], ctx.state.overlayRunId ?? '', (id) => ctx.update({ overlayRunId: id || null }), 'overlay another run'));
    }
    this.root.append(top, layerPicker(ctx, focus, true));
    this.slider.type = 'range';
    this.slider.min = '0';
    this.slider.step = '1';
    this.slider.addEventListener('input', () => {
      const steps = this.focusSteps();
      ctx.update({ step: steps[Number(this.slider.value)] ?? null });
    });
    const stepControl = element('label', 'control wide');
    stepControl.append('Step ', this.slider, this.stepLabel);
    this.root.append(stepControl);
    const grid = element('div', `panels n${runs.length}`);
    for (const run of runs) {
      const panel = element('div', 'panel');
      const title = element('h2', 'panel-title');
      const { box, canvas, legend } = chartBox('E8M0 block-scale exponents at the step (fraction of blocks)', 220);
      const heatBox = element('section', 'chart-box');
      heatBox.append(element('h3', undefined, 'Exponent over steps'));
      const heatmap = element('canvas', 'heatmap');
      const stats = element('div', 'stats');
      const entry: Panel = { run, chart: barChart(canvas, ctx.theme, { xTitle: 'exponent (2^e)', yTitle: 'fraction of blocks' }), legend, heatmap, stats, title, drawn: null };
      heatBox.append(interactiveHeatmap(heatmap, `${run.name}: block-scale exponents over steps`, this.heatHandlers(entry)));
      panel.append(title, stats, box, heatBox);
      grid.append(panel);
      this.panels.push(entry);
    }
    this.root.append(grid);
  }

  private heatHandlers(panel: Panel): HeatmapHandlers {
    return {
      geometry: () => panel.drawn?.geometry ?? null,
      describe: (column, row) => {
        const drawn = panel.drawn;
        if (!drawn) return null;
        const exponent = drawn.hi - row;
        const e = exponent - drawn.minExp;
        const fraction = e >= 0 && e < drawn.grid.rows ? drawn.grid.cells[column * drawn.grid.rows + e]! : 0;
        // Column c folds the stats samples i with floor(i · columns / samples) = c.
        const samples = drawn.steps.length;
        const from = drawn.grid.columnStep[column]!;
        const to = drawn.steps[Math.ceil(((column + 1) * samples) / drawn.grid.columns) - 1] ?? from;
        const steps = to === from ? `step ${from}` : `steps ${from}–${to}`;
        return `${steps} · 2^${exponent} · ${formatNumber(fraction * 100)} % of blocks`;
      },
      pick: (column) => {
        const step = panel.drawn?.grid.columnStep[column];
        if (step !== undefined) this.ctx.update({ step });
      },
      move: (columns) => {
        if (columns === 0) return;
        const steps = this.focusSteps();
        const next = steps[Math.max(0, Math.min(steps.length - 1, stepIndex(steps, this.ctx.state.step) + columns))];
        if (next !== undefined) this.ctx.update({ step: next });
      },
    };
  }

  private focusSteps(): number[] {
    const panel = this.panels[0];
    if (!panel) return [];
    return this.detailFor(panel.run)?.steps ?? [];
  }

  private detailFor(run: RunInfo): LayerDetailMessage | undefined {
    const layer = currentLayer(this.ctx);
    return layer === null ? undefined : this.ctx.detail(run.runId, layer, this.ctx.state.gemm, this.ctx.state.operand);
  }

  update(): void {
    const { state, theme } = this.ctx;
    const steps = this.focusSteps();
    const focusIndex = stepIndex(steps, state.step);
    this.slider.max = String(Math.max(0, steps.length - 1));
    this.slider.value = String(focusIndex);
    const step = steps[focusIndex] ?? null;
    this.stepLabel.textContent = step === null ? 'no stats yet' : `${step}${state.step === null ? ' (newest)' : ''}`;
    this.csvRows = [];
    const overlayRun = state.mode === 'single' && state.overlayRunId ? this.ctx.data.run(state.overlayRunId) : undefined;
    const overlay = overlayRun ? this.detailFor(overlayRun) : undefined;
    const layer = currentLayer(this.ctx);
    // Side by side panels (and an overlay) share both axes, or equal bars would look different.
    const drawn = [...this.panels.map((panel) => this.detailFor(panel.run)), overlay].filter((d): d is LayerDetailMessage => d !== undefined && d.exponents > 0);
    const lo = Math.min(...drawn.map((d) => d.minExp));
    const hi = Math.max(...drawn.map((d) => d.minExp + d.exponents - 1));
    const labels = Array.from({ length: Math.max(0, hi - lo + 1) }, (_, i) => String(lo + i));
    let yMax = 0;
    for (const panel of this.panels) {
      panel.title.textContent = `${panel.run.name} — ${layer ?? 'no layers'} · ${state.gemm} · ${state.operand}`;
      const detail = this.detailFor(panel.run);
      if (!detail || detail.steps.length === 0) {
        panel.stats.textContent = detail ? 'No layer stats for this layer yet.' : 'Loading…';
        panel.chart.data.labels = [];
        panel.chart.data.datasets = [];
        panel.chart.update('none');
        continue;
      }
      const index = stepIndex(detail.steps, step);
      const here = histogramAt(detail, index);
      const series = [{ run: panel.run, detail, index, histogram: here }];
      if (overlay && overlayRun && overlay.steps.length > 0) {
        const overlayIndex = stepIndex(overlay.steps, step);
        series.push({ run: overlayRun, detail: overlay, index: overlayIndex, histogram: histogramAt(overlay, overlayIndex) });
      }
      panel.chart.data.labels = labels;
      panel.chart.data.datasets = series.map((s, k) => {
        const color = this.ctx.color(s.run.runId);
        return {
          label: `${s.run.name} @ ${s.detail.steps[s.index]}`,
          data: labels.map((label) => s.histogram.fractions.get(Number(label)) ?? 0),
          backgroundColor: withAlpha(color, k === 0 ? 0.75 : 0.35),
          borderColor: color,
          borderWidth: k === 0 ? 0 : 1,
        };
      });
      for (const s of series) for (const fraction of s.histogram.fractions.values()) yMax = Math.max(yMax, fraction);
      setLegend(panel.legend, series.map((s) => ({ label: `${s.run.name} @ step ${s.detail.steps[s.index]}`, color: this.ctx.color(s.run.runId) })));
      const nan = detail.nanBlocks[index]!;
      panel.stats.replaceChildren(
        stat('step', String(detail.steps[index])),
        stat('blocks', String(here.total + nan)),
        stat('saturated', `${formatNumber(detail.saturatedFrac[index]! * 100)} %`),
        stat('flushed to zero', `${formatNumber(detail.flushedFrac[index]! * 100)} %`),
        stat('NaN scales', String(nan), nan > 0),
        stat('SQNR', `${formatNumber(detail.sqnrDb[index] ?? null)} dB`),
      );
      const heat = binHeatmap(detail, Math.max(1, panel.heatmap.clientWidth - 44));
      const column = Math.min(heat.columns - 1, Math.floor((index * heat.columns) / detail.steps.length));
      panel.drawn = { grid: heat, geometry: drawHeatmap(panel.heatmap, heat, { minExp: detail.minExp, lo, hi }, theme, column), hi, minExp: detail.minExp, steps: detail.steps };
      for (const s of series) for (const label of labels) this.csvRows.push([s.run.runId, s.run.name, layer, state.gemm, state.operand, s.detail.steps[s.index]!, Number(label), s.histogram.fractions.get(Number(label)) ?? 0]);
    }
    for (const panel of this.panels) {
      const y = panel.chart.options.scales?.y;
      if (y) y.max = yMax > 0 ? Math.min(1, yMax * 1.05) : undefined;
      panel.chart.update('none');
    }
  }

  csv() {
    return { name: 'scale-histogram.csv', header: ['run_id', 'run', 'layer', 'gemm', 'operand', 'step', 'exponent', 'fraction'], rows: this.csvRows };
  }

  canvas(): HTMLCanvasElement | null {
    return this.panels[0]?.chart.canvas ?? null;
  }

  destroy(): void {
    for (const panel of this.panels) panel.chart.destroy();
  }
}

function stat(label: string, value: string, bad = false): HTMLElement {
  const item = element('span', bad ? 'stat bad' : 'stat');
  item.append(element('span', 'muted', `${label} `), element('strong', undefined, value));
  return item;
}

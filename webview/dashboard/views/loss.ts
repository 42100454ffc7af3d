// Loss against step or tokens: train (EMA-smoothed, raw faint behind) and validation (dashed) for
// every shown run, optionally as the gap to a baseline run, with divergence points marked; an
// outlier-robust y range, wheel zoom (x; shift: y) and a reset button; below it, the gradient norm
// and learning rate of the same runs on the same x range.
import { sliceToRange } from '../model/decimate.js';
import { KeptByKey } from '../model/kept-by-key.js';
import { decimateMinMax, LiveLine } from '../model/live-line.js';
import { MAX_EMA, zoomAround, type UiState } from '../model/ui-state.js';
import { gapTo } from '../model/interpolate.js';
import type { LossSeries, RunInfo } from '../../../src/protocol/webview.js';
import { button, checkbox, dropdown } from '../../ui/toolkit.js';
import { robustRange, zoomRange } from '../model/robust-range.js';
import { groupName, meanBand, seedGroups } from '../model/seed-groups.js';
import { DENSE_LINE_WIDTH, lineChart, setAxes, type Chart, type LineDataset, type XY } from '../charts.js';
import { chartBox, element, setLegend, type Context, type View } from '../context.js';
import { withAlpha } from '../theme.js';

interface Curve {
  run: RunInfo;
  kind: 'train' | 'validation';
  xs: readonly number[];
  ys: readonly (number | null)[];
}

export class LossView implements View {
  readonly root = element('div', 'view loss-view');
  private readonly chart;
  private readonly legend: HTMLElement;
  private readonly emaLabel = element('span', 'value');
  private readonly resetZoom: HTMLElement = button('Reset zoom', () => this.ctx.update({ zoom: null, yZoom: null }), { title: 'Show every step and the automatic y range (or double-click the chart)' });
  private readonly gradNorm: Chart<'line', XY[]> | undefined;
  private readonly lr: Chart<'line', XY[]> | undefined;
  private curves: Curve[] = [];
  /** Smoothed and decimated lines, and the three charts' datasets, kept across updates (see LiveLine). */
  private readonly lines = new KeptByKey<LiveLine>();
  private readonly datasets = new KeptByKey<LineDataset>();
  private readonly normSets = new KeptByKey<LineDataset>();
  private readonly rateSets = new KeptByKey<LineDataset>();
  private readonly optimizerLines = new KeptByKey<LiveLine>();
  private optimizerFrame = 0;
  private legendKey = '';

  constructor(
    private readonly ctx: Context,
    private readonly compact = false,
  ) {
    const { box, canvas, legend } = chartBox(compact ? 'Loss' : 'Training and validation loss', compact ? 150 : 360);
    this.legend = legend;
    box.classList.add('loss-chart');
    if (!compact) this.root.append(this.controls());
    this.root.append(box);
    this.chart = lineChart(canvas, ctx.theme, this.axisOptions());
    if (!compact) {
      canvas.title = 'Wheel to zoom the x axis, shift+wheel the y axis, double-click to show everything';
      canvas.addEventListener('wheel', (event) => this.zoom(event), { passive: false });
      canvas.addEventListener('dblclick', () => ctx.update({ zoom: null, yZoom: null }));
      const pair = element('div', 'panels n2');
      const g = chartBox('Gradient norm (before clipping)', 160);
      const l = chartBox('Learning rate', 160);
      g.box.classList.add('grad-norm');
      l.box.classList.add('learning-rate');
      pair.append(g.box, l.box);
      this.root.append(pair);
      this.gradNorm = lineChart(g.canvas, ctx.theme, { xTitle: 'step', yTitle: 'grad norm', logY: true });
      this.lr = lineChart(l.canvas, ctx.theme, { xTitle: 'step', yTitle: 'learning rate' });
    }
  }

  private axisOptions() {
    const s = this.ctx.state;
    const zoom = this.compact ? null : s.zoom;
    return {
      xTitle: s.xAxis === 'tokens' ? 'tokens' : 'step',
      yTitle: s.relative ? 'loss − baseline' : 'loss',
      logY: s.logScale && !s.relative,
      xRange: zoom ? ([zoom.min, zoom.max] as [number, number]) : undefined,
      integerX: s.xAxis === 'step',
    };
  }

  /** The y range: the user's y zoom, else robust to outliers (when on), else Chart.js's own. */
  private yRange(): [number, number] | undefined {
    const s = this.ctx.state;
    if (!this.compact && s.yZoom) return [s.yZoom.min, s.yZoom.max];
    if (!s.robustY) return undefined;
    const zoom = this.compact ? null : s.zoom;
    const visible = this.curves.map((curve) => (zoom ? sliceToRange(curve.xs, curve.ys, zoom.min, zoom.max).ys : curve.ys));
    return robustRange(visible, s.logScale && !s.relative) ?? undefined;
  }

  /** Wheel over the chart zooms the x axis around the pointer (the data's full range bounds it); shift+wheel the y axis. */
  private zoom(event: WheelEvent): void {
    const x = this.chart.scales.x;
    const y = this.chart.scales.y;
    if (!x || !y || this.curves.length === 0) return;
    event.preventDefault();
    const factor = (event.deltaY || event.deltaX) < 0 ? 0.8 : 1.25;
    if (event.shiftKey) {
      const at = y.getValueForPixel(event.offsetY) ?? (y.min + y.max) / 2;
      const [min, max] = zoomRange([y.min, y.max], at, factor);
      this.ctx.update({ yZoom: max > min ? { min, max } : null });
      return;
    }
    const lo = Math.min(...this.curves.map((curve) => curve.xs[0] ?? Infinity));
    const hi = Math.max(...this.curves.map((curve) => curve.xs[curve.xs.length - 1] ?? -Infinity));
    if (!(hi > lo)) return;
    const current = this.ctx.state.zoom ?? { min: lo, max: hi };
    const at = x.getValueForPixel(event.offsetX) ?? (current.min + current.max) / 2;
    this.ctx.update({ zoom: zoomAround(current, at, factor, lo, hi) });
  }

  private controls(): HTMLElement {
    const ctx = this.ctx;
    const state = ctx.state;
    const update = (patch: Partial<UiState>) => ctx.update(patch);
    const bar = element('div', 'controls');
    bar.append(
      dropdown([{ value: 'step', label: 'vs step' }, { value: 'tokens', label: 'vs tokens' }], state.xAxis, (v) => update({ xAxis: v as 'step' | 'tokens', zoom: null }), 'x axis'),
    );
    const slider = element('input', 'slider');
    slider.type = 'range';
    slider.min = '0';
    slider.max = String(MAX_EMA);
    slider.step = '0.01';
    slider.value = String(state.ema);
    slider.title = 'EMA smoothing';
    slider.addEventListener('input', () => update({ ema: Number(slider.value) }));
    const emaControl = element('label', 'control');
    emaControl.append('Smoothing ', slider, this.emaLabel);
    bar.append(emaControl);
    bar.append(checkbox('Log scale', state.logScale, (logScale) => update({ logScale })));
    bar.append(checkbox('Relative to baseline', state.relative, (relative) => update({ relative })));
    bar.append(checkbox('Clip outliers', state.robustY, (robustY) => update({ robustY })));
    const runs = this.ctx.data.runs.map((run) => ({ value: run.runId, label: `baseline: ${run.name}` }));
    if (runs.length > 0) bar.append(dropdown(runs, this.baselineId(), (baselineRunId) => update({ baselineRunId }), 'baseline run'));
    for (const group of seedGroups(this.ctx.data.runs)) {
      const on = !state.ungroupedSeeds.includes(group.key);
      bar.append(
        checkbox(`${groupName(group)}: ${group.runs.length} seeds as mean ± sd`, on, (grouping) =>
          ctx.update({ ungroupedSeeds: grouping ? ctx.state.ungroupedSeeds.filter((key) => key !== group.key) : [...ctx.state.ungroupedSeeds, group.key] }),
        ),
      );
    }
    bar.append(this.resetZoom);
    return bar;
  }

  private baselineId(): string | null {
    const { state, data } = this.ctx;
    return state.baselineRunId && data.run(state.baselineRunId) ? state.baselineRunId : (data.runs[0]?.runId ?? null);
  }

  update(): void {
    const { state, data, theme } = this.ctx;
    // Set only when it changes: a new text node makes the next frame lay the controls out again.
    const ema = state.ema.toFixed(2);
    if (this.emaLabel.textContent !== ema) this.emaLabel.textContent = ema;
    const xOf = (series: LossSeries) => (state.xAxis === 'tokens' ? series.tokens : series.step);
    // ~1 bucket per 2 px: up to 4 points each, so min/max detail stays at pixel resolution.
    const buckets = Math.max(100, (this.chart.width || 800) / 2);
    const zoom = this.compact ? null : state.zoom;
    /** A series' smoothed values and drawn points; unzoomed, a live run's new steps cost only the newest bucket. */
    const line = (key: string, xs: number[], ys: readonly (number | null)[], weight = 0) => {
      const live = this.lines.take(`${key}|${state.xAxis}`, () => new LiveLine(buckets, weight), (kept) => kept.buckets === buckets && kept.weight === weight).sync(xs, ys);
      if (!zoom) return { points: live.points, values: live.values };
      const visible = sliceToRange(xs, live.values, zoom.min, zoom.max);
      return { points: decimateMinMax(visible.xs, visible.ys, buckets), values: live.values };
    };
    const baseline = this.baselineId();
    const baseTrain = baseline ? data.loss.get(baseline) : undefined;
    const baseSmoothed = baseTrain ? { xs: xOf(baseTrain), ys: line(`${baseline}|train`, xOf(baseTrain), baseTrain.loss, state.ema).values } : undefined;
    const baseVal = baseline ? data.validation.get(baseline) : undefined;
    const relative = (xs: number[], ys: readonly (number | null)[], base: { xs: number[]; ys: readonly (number | null)[] } | undefined) =>
      state.relative ? (base ? gapTo(base.xs, base.ys, xs, ys) : ys.map(() => null)) : ys;
    const dataset = (key: string, fields: LineDataset): void => {
      Object.assign(this.datasets.take(key, () => ({ data: [] })), fields);
    };

    this.curves = [];
    const legend: { label: string; color: string; dashed?: boolean }[] = [];
    const shown = this.ctx.shownRuns();
    // Groups come from every run held (so names match the toggles), drawn with their shown members.
    const shownIds = new Set(shown.map((run) => run.runId));
    const groups = this.compact
      ? []
      : seedGroups(data.runs)
          .filter((group) => !state.ungroupedSeeds.includes(group.key))
          .map((group) => ({ name: groupName(group), runs: group.runs.filter((run) => shownIds.has(run.runId)) }))
          .filter((group) => group.runs.length >= 2);
    const grouped = new Set(groups.flatMap((group) => group.runs.map((run) => run.runId)));
    for (const run of shown) {
      if (grouped.has(run.runId)) continue;
      const color = this.ctx.color(run.runId);
      const train = data.loss.get(run.runId);
      if (train) {
        const xs = xOf(train);
        let smoothed = line(`${run.runId}|train`, xs, train.loss, state.ema);
        if (state.relative) smoothed = line(`${run.runId}|gap`, xs, relative(xs, smoothed.values, baseSmoothed));
        if (state.ema > 0 && !state.relative && !this.compact) {
          dataset(`${run.runId}|raw`, { label: `${run.name} (raw)`, data: line(`${run.runId}|raw`, xs, train.loss).points, borderColor: withAlpha(color, 0.25), borderWidth: DENSE_LINE_WIDTH });
        }
        dataset(`${run.runId}|train`, { label: `${run.name} · train`, data: smoothed.points, borderColor: color, borderWidth: DENSE_LINE_WIDTH });
        legend.push({ label: `${run.name} · train`, color });
        this.curves.push({ run, kind: 'train', xs, ys: smoothed.values });
        const diverged = run.divergedAt;
        if (diverged !== null) {
          const marker = divergenceMarker(train, diverged, xs, smoothed.values);
          if (marker) {
            dataset(`${run.runId}|diverged`, { label: `${run.name} · diverged`, data: [marker], borderColor: theme.error, backgroundColor: theme.error, pointStyle: 'crossRot', pointRadius: 8, pointBorderWidth: 2, showLine: false });
            legend.push({ label: `${run.name} diverged @ ${diverged}`, color: theme.error });
          }
        }
      }
      const validation = this.compact ? undefined : data.validation.get(run.runId);
      if (validation && validation.step.length > 0) {
        const xs = xOf(validation);
        const baseValCurve = baseVal ? { xs: xOf(baseVal), ys: baseVal.loss } : undefined;
        const ys = relative(xs, validation.loss, baseValCurve);
        dataset(`${run.runId}|validation`, { label: `${run.name} · validation`, data: toPoints(xs, ys), borderColor: color, borderDash: [5, 4], pointRadius: 2, pointBackgroundColor: color });
        legend.push({ label: `${run.name} · validation`, color, dashed: true });
        this.curves.push({ run, kind: 'validation', xs, ys });
      }
    }
    for (const group of groups) {
      const members = group.runs.flatMap((run) => {
        const train = data.loss.get(run.runId);
        return train ? [{ runId: run.runId, train }] : [];
      });
      if (members.length < 2) continue;
      const band = meanBand(members.map(({ runId, train }) => ({ xs: xOf(train), ys: relative(xOf(train), line(`${runId}|train`, xOf(train), train.loss, state.ema).values, baseSmoothed) })));
      const color = this.ctx.color(group.runs[0]!.runId);
      const label = `${group.name} · mean ± sd of ${members.length} seeds`;
      const every = Math.max(1, Math.ceil(band.xs.length / buckets));
      const thin = (ys: number[]) => toPoints(band.xs.filter((_, i) => i % every === 0), ys.filter((_, i) => i % every === 0));
      // Keyed by the group's first run: names need not be unique, dataset keys must.
      const key = `group|${group.runs[0]!.runId}`;
      dataset(`${key}|hi`, { label: '', data: thin(band.hi), borderColor: 'transparent', backgroundColor: withAlpha(color, 0.22), fill: '+1', pointRadius: 0 });
      dataset(`${key}|lo`, { label: '', data: thin(band.lo), borderColor: 'transparent', pointRadius: 0 });
      dataset(`${key}|mean`, { label, data: thin(band.mean), borderColor: color, borderWidth: 2 });
      legend.push({ label, color });
      this.curves.push({ run: group.runs[0]!, kind: 'train', xs: band.xs, ys: band.mean });
    }
    setAxes(this.chart, theme, { ...this.axisOptions(), yRange: this.yRange() });
    this.chart.data.datasets = this.datasets.sweep();
    this.chart.update('none');
    this.showLegend(legend);
    this.resetZoom.toggleAttribute('disabled', state.zoom === null && state.yZoom === null);
    this.lines.sweep();
    this.scheduleOptimizerCharts();
  }

  /** The legend under the chart, rebuilt only when it changed (a live run's steps leave it as it is). */
  private showLegend(entries: { label: string; color: string; dashed?: boolean }[]): void {
    const key = JSON.stringify(entries);
    if (key === this.legendKey) return;
    this.legendKey = key;
    setLegend(this.legend, entries);
  }

  /**
   * The gradient-norm and learning-rate charts draw in the frame after the one that shows the loss
   * chart: a live run's step then costs two frames of about half the work each, not one frame over
   * budget. The dashboard draws a delta as it arrives, so the next frame shows the loss chart and
   * these wait for the one after it.
   */
  private scheduleOptimizerCharts(): void {
    if (!this.gradNorm || this.optimizerFrame !== 0) return;
    this.optimizerFrame = requestAnimationFrame(() => {
      this.optimizerFrame = requestAnimationFrame(() => {
        this.optimizerFrame = 0;
        this.updateOptimizerCharts();
      });
    });
  }

  /** Gradient norm and learning rate of the shown runs, on the loss chart's x range. */
  private updateOptimizerCharts(): void {
    if (!this.gradNorm || !this.lr) return;
    const { state, data, theme } = this.ctx;
    const xOf = (series: LossSeries) => (state.xAxis === 'tokens' ? series.tokens : series.step);
    const zoom = state.zoom;
    const buckets = Math.max(100, (this.gradNorm.width || 400) / 2);
    const draw = (key: string, xs: number[], ys: readonly (number | null)[]) => {
      const live = this.optimizerLines.take(`${key}|${state.xAxis}`, () => new LiveLine(buckets), (kept) => kept.buckets === buckets).sync(xs, ys);
      if (!zoom) return live.points;
      const visible = sliceToRange(xs, ys, zoom.min, zoom.max);
      return decimateMinMax(visible.xs, visible.ys, buckets);
    };
    for (const run of this.ctx.shownRuns()) {
      const train = data.loss.get(run.runId);
      if (!train?.gradNorm || !train.lr) continue;
      const color = this.ctx.color(run.runId);
      const xs = xOf(train);
      Object.assign(this.normSets.take(run.runId, () => ({ data: [] })), { label: `${run.name} · grad norm`, data: draw(`${run.runId}|gradNorm`, xs, train.gradNorm), borderColor: color, borderWidth: DENSE_LINE_WIDTH });
      Object.assign(this.rateSets.take(run.runId, () => ({ data: [] })), { label: `${run.name} · lr`, data: draw(`${run.runId}|lr`, xs, train.lr), borderColor: color, borderWidth: DENSE_LINE_WIDTH });
    }
    const xTitle = state.xAxis === 'tokens' ? 'tokens' : 'step';
    const xRange = zoom ? ([zoom.min, zoom.max] as [number, number]) : undefined;
    setAxes(this.gradNorm, theme, { xTitle, yTitle: 'grad norm', logY: true, xRange, integerX: state.xAxis === 'step' });
    setAxes(this.lr, theme, { xTitle, yTitle: 'learning rate', xRange, integerX: state.xAxis === 'step' });
    this.gradNorm.data.datasets = this.normSets.sweep();
    this.lr.data.datasets = this.rateSets.sweep();
    this.gradNorm.update('none');
    this.lr.update('none');
    this.optimizerLines.sweep();
  }

  csv() {
    const rows = this.curves.flatMap((curve) => curve.xs.map((x, i) => [curve.run.runId, curve.run.name, curve.kind, x, curve.ys[i]!] as (string | number | null)[]));
    return { name: 'loss.csv', header: ['run_id', 'run', 'series', this.ctx.state.xAxis, this.ctx.state.relative ? 'loss_minus_baseline' : 'loss'], rows };
  }

  canvas(): HTMLCanvasElement {
    return this.chart.canvas;
  }

  destroy(): void {
    cancelAnimationFrame(this.optimizerFrame);
    this.chart.destroy();
    this.gradNorm?.destroy();
    this.lr?.destroy();
  }
}

function toPoints(xs: readonly number[], ys: readonly (number | null)[]): XY[] {
  const points: XY[] = [];
  for (let i = 0; i < xs.length; i++) if (ys[i] !== null) points.push({ x: xs[i]!, y: ys[i]! });
  return points;
}

/** Mark divergence at its step, on the curve's last finite value at or before it. */
function divergenceMarker(train: LossSeries, step: number, xs: readonly number[], ys: readonly (number | null)[]): XY | null {
  let at = train.step.findIndex((s) => s >= step);
  if (at < 0) at = train.step.length - 1;
  for (let i = at; i >= 0; i--) if (ys[i] !== null) return { x: xs[at]!, y: ys[i]! };
  return null;
}

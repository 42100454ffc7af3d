// Loss against step or tokens: train (EMA-smoothed, raw faint behind) and validation (dashed) for
// every shown run, optionally as the gap to a baseline run, with divergence points marked.
import { ema } from '../model/smoothing.js';
import { decimateMinMax, sliceToRange } from '../model/decimate.js';
import { zoomAround } from '../model/ui-state.js';
import { gapTo } from '../model/interpolate.js';
import type { LossSeries, RunInfo } from '../../../src/protocol/webview.js';
import { checkbox, dropdown } from '../../ui/toolkit.js';
import { lineChart, setAxes, type LineDataset, type XY } from '../charts.js';
import { chartBox, element, setLegend, type Context, type View } from '../context.js';
import { withAlpha } from '../theme.js';

interface Curve {
  run: RunInfo;
  kind: 'train' | 'validation';
  xs: number[];
  ys: (number | null)[];
}

export class LossView implements View {
  readonly root = element('div', 'view loss-view');
  private readonly chart;
  private readonly legend: HTMLElement;
  private readonly emaLabel = element('span', 'value');
  private curves: Curve[] = [];

  constructor(
    private readonly ctx: Context,
    private readonly compact = false,
  ) {
    const { box, canvas, legend } = chartBox(compact ? 'Loss' : 'Training and validation loss', compact ? 180 : 360);
    this.legend = legend;
    if (!compact) this.root.append(this.controls());
    this.root.append(box);
    this.chart = lineChart(canvas, ctx.theme, this.axisOptions());
    if (!compact) {
      canvas.title = 'Wheel to zoom the x axis, double-click to show everything';
      canvas.addEventListener('wheel', (event) => this.zoom(event), { passive: false });
      canvas.addEventListener('dblclick', () => ctx.update({ zoom: null }));
    }
    this.update();
  }

  private axisOptions() {
    const s = this.ctx.state;
    const zoom = this.compact ? null : s.zoom;
    return { xTitle: s.xAxis === 'tokens' ? 'tokens' : 'step', yTitle: s.relative ? 'loss − baseline' : 'loss', logY: s.logScale && !s.relative, xRange: zoom ? ([zoom.min, zoom.max] as [number, number]) : undefined };
  }

  /** Wheel over the chart zooms the x axis around the pointer (the data's full range bounds it). */
  private zoom(event: WheelEvent): void {
    const x = this.chart.scales.x;
    if (!x || this.curves.length === 0) return;
    event.preventDefault();
    const lo = Math.min(...this.curves.map((curve) => curve.xs[0] ?? Infinity));
    const hi = Math.max(...this.curves.map((curve) => curve.xs[curve.xs.length - 1] ?? -Infinity));
    if (!(hi > lo)) return;
    const current = this.ctx.state.zoom ?? { min: lo, max: hi };
    const at = x.getValueForPixel(event.offsetX) ?? (current.min + current.max) / 2;
    this.ctx.update({ zoom: zoomAround(current, at, event.deltaY < 0 ? 0.8 : 1.25, lo, hi) });
  }

  private controls(): HTMLElement {
    const { state, update } = this.ctx;
    const bar = element('div', 'controls');
    bar.append(
      dropdown([{ value: 'step', label: 'vs step' }, { value: 'tokens', label: 'vs tokens' }], state.xAxis, (v) => update({ xAxis: v as 'step' | 'tokens', zoom: null }), 'x axis'),
    );
    const slider = element('input', 'slider');
    slider.type = 'range';
    slider.min = '0';
    slider.max = '0.99';
    slider.step = '0.01';
    slider.value = String(state.ema);
    slider.title = 'EMA smoothing';
    slider.addEventListener('input', () => update({ ema: Number(slider.value) }));
    const emaControl = element('label', 'control');
    emaControl.append('Smoothing ', slider, this.emaLabel);
    bar.append(emaControl);
    bar.append(checkbox('Log scale', state.logScale, (logScale) => update({ logScale })));
    bar.append(checkbox('Relative to baseline', state.relative, (relative) => update({ relative })));
    const runs = this.ctx.data.runs.map((run) => ({ value: run.runId, label: `baseline: ${run.name}` }));
    if (runs.length > 0) bar.append(dropdown(runs, this.baselineId(), (baselineRunId) => update({ baselineRunId }), 'baseline run'));
    return bar;
  }

  private baselineId(): string | null {
    const { state, data } = this.ctx;
    return state.baselineRunId && data.run(state.baselineRunId) ? state.baselineRunId : (data.runs[0]?.runId ?? null);
  }

  update(): void {
    const { state, data, theme } = this.ctx;
    this.emaLabel.textContent = state.ema.toFixed(2);
    const xOf = (series: LossSeries) => (state.xAxis === 'tokens' ? series.tokens : series.step);
    const smooth = (ys: (number | null)[]) => (state.ema > 0 ? ema(ys, state.ema) : ys);
    const baseline = this.baselineId();
    const baseTrain = baseline ? data.loss.get(baseline) : undefined;
    const baseSmoothed = baseTrain ? { xs: xOf(baseTrain), ys: smooth(baseTrain.loss) } : undefined;
    const baseVal = baseline ? data.validation.get(baseline) : undefined;
    const relative = (xs: number[], ys: (number | null)[], base: { xs: number[]; ys: (number | null)[] } | undefined) =>
      state.relative ? (base ? gapTo(base.xs, base.ys, xs, ys) : ys.map(() => null)) : ys;

    this.curves = [];
    const datasets: LineDataset[] = [];
    const legend: { label: string; color: string; dashed?: boolean }[] = [];
    // ~1 bucket per 2 px: up to 4 points each, so min/max detail stays at pixel resolution.
    const buckets = Math.max(100, (this.chart.width || 800) / 2);
    const zoom = this.compact ? null : state.zoom;
    const draw = (xs: number[], ys: (number | null)[]) => {
      const visible = zoom ? sliceToRange(xs, ys, zoom.min, zoom.max) : { xs, ys };
      return decimateMinMax(visible.xs, visible.ys, buckets);
    };
    for (const run of this.ctx.shownRuns()) {
      const color = this.ctx.color(run.runId);
      const train = data.loss.get(run.runId);
      if (train) {
        const xs = xOf(train);
        const smoothed = relative(xs, smooth(train.loss), baseSmoothed);
        if (state.ema > 0 && !state.relative && !this.compact) {
          datasets.push({ label: `${run.name} (raw)`, data: draw(xs, train.loss), borderColor: withAlpha(color, 0.25), borderWidth: 1 });
        }
        datasets.push({ label: `${run.name} · train`, data: draw(xs, smoothed), borderColor: color });
        legend.push({ label: `${run.name} · train`, color });
        this.curves.push({ run, kind: 'train', xs, ys: smoothed });
        const diverged = run.divergedAt;
        if (diverged !== null) {
          const marker = divergenceMarker(train, diverged, xs, smoothed);
          if (marker) {
            datasets.push({ label: `${run.name} · diverged`, data: [marker], borderColor: theme.error, backgroundColor: theme.error, pointStyle: 'crossRot', pointRadius: 8, pointBorderWidth: 2, showLine: false });
            legend.push({ label: `${run.name} diverged @ ${diverged}`, color: theme.error });
          }
        }
      }
      const validation = this.compact ? undefined : data.validation.get(run.runId);
      if (validation && validation.step.length > 0) {
        const xs = xOf(validation);
        const baseValCurve = baseVal ? { xs: xOf(baseVal), ys: baseVal.loss } : undefined;
        const ys = relative(xs, validation.loss, baseValCurve);
        datasets.push({ label: `${run.name} · validation`, data: toPoints(xs, ys), borderColor: color, borderDash: [5, 4], pointRadius: 2, pointBackgroundColor: color });
        legend.push({ label: `${run.name} · validation`, color, dashed: true });
        this.curves.push({ run, kind: 'validation', xs, ys });
      }
    }
    setAxes(this.chart, theme, this.axisOptions());
    this.chart.data.datasets = datasets;
    this.chart.update('none');
    setLegend(this.legend, legend);
  }

  csv() {
    const rows = this.curves.flatMap((curve) => curve.xs.map((x, i) => [curve.run.name, curve.kind, x, curve.ys[i]!] as (string | number | null)[]));
    return { name: 'loss.csv', header: ['run', 'series', this.ctx.state.xAxis, this.ctx.state.relative ? 'loss_minus_baseline' : 'loss'], rows };
  }

  canvas(): HTMLCanvasElement {
    return this.chart.canvas;
  }

  destroy(): void {
    this.chart.destroy();
  }
}

function toPoints(xs: readonly number[], ys: readonly (number | null)[]): XY[] {
  const points: XY[] = [];
  for (let i = 0; i < xs.length; i++) if (ys[i] !== null) points.push({ x: xs[i]!, y: ys[i]! });
  return points;
}

/** Mark divergence at its step, on the curve's last finite value at or before it. */
function divergenceMarker(train: LossSeries, step: number, xs: number[], ys: (number | null)[]): XY | null {
  let at = train.step.findIndex((s) => s >= step);
  if (at < 0) at = train.step.length - 1;
  for (let i = at; i >= 0; i--) if (ys[i] !== null) return { x: xs[at]!, y: ys[i]! };
  return null;
}

// Wgrad error correlation for the chosen layer: cos(E_t, E_{t−1}) and cos(E_t, E_{t−k}) against
// step, and the autocorrelation over lags from the error sketches. One panel per run, side by side,
// so a deterministic rotation's persistent error stands next to a random rotation's decorrelated one.
import { rotationNote, wgradErrorNote } from '../../../src/protocol/config.js';
import type { RunInfo } from '../../../src/protocol/webview.js';
import { dropdown } from '../../ui/toolkit.js';
import { lineChart, type LineDataset, type XY } from '../charts.js';
import { chartBox, element, formatNumber, setLegend, type Context, type View } from '../context.js';
import { cosineNoiseFloor } from '../model/noise-floor.js';
import { controlsWithRunPicker, currentLayer, layerPicker, panelRunsOrNote } from '../layer-picker.js';
import { withAlpha } from '../theme.js';

const LAGS = [1, 2, 4, 8, 16, 32];

interface Panel {
  run: RunInfo;
  title: HTMLElement;
  overTime: ReturnType<typeof lineChart>;
  overTimeLegend: HTMLElement;
  autocorr: ReturnType<typeof lineChart>;
  autocorrLegend: HTMLElement;
}

/**
 * The lag-1 curve's legend entry. A layer with Wgrad error records on several stats steps and no
 * lag-1 on any had no E_{t−1} kept by its trainer: the bridge's lag-1 off, or past its host-memory
 * budget (docs/bridge.md), which the records only show as nulls.
 */
function lag1Label(stats: number, reported: number): string {
  return stats > 1 && reported === 0 ? 'lag 1 (full tensor): none reported for this layer — its trainer kept no E_t−1 (lag-1 off, or past its memory budget)' : 'lag 1 (full tensor)';
}

export class CorrelationView implements View {
  readonly root = element('div', 'view correlation-view');
  private readonly panels: Panel[] = [];
  private csvRows: (string | number | null)[][] = [];

  constructor(private readonly ctx: Context) {
    const runs = panelRunsOrNote(ctx, this.root);
    if (!runs) return;
    const focus = runs[0];
    const bar = controlsWithRunPicker(ctx);
    bar.append(dropdown(LAGS.map((lag) => ({ value: String(lag), label: `lag k = ${lag} stats steps` })), String(ctx.state.lag), (lag) => ctx.update({ lag: Number(lag) }), 'lag k'));
    this.root.append(bar, layerPicker(ctx, focus, false));
    const grid = element('div', `panels n${runs.length}`);
    for (const run of runs) {
      const panel = element('div', 'panel');
      const title = element('h2', 'panel-title');
      const a = chartBox('cos(E_t, E_t−k) against step', 220);
      const b = chartBox('Autocorrelation of the Wgrad error over lags (from sketches)', 200);
      panel.append(title, a.box, b.box);
      grid.append(panel);
      this.panels.push({
        run,
        title,
        overTime: lineChart(a.canvas, ctx.theme, { xTitle: 'step', yTitle: 'cosine', yRange: [-1, 1] }),
        overTimeLegend: a.legend,
        autocorr: lineChart(b.canvas, ctx.theme, { xTitle: 'lag (stats steps)', yTitle: 'mean cosine', yRange: [-1, 1] }),
        autocorrLegend: b.legend,
      });
    }
    this.root.append(grid);
  }

  update(): void {
    const { state } = this.ctx;
    this.csvRows = [];
    for (const panel of this.panels) {
      const layer = currentLayer(this.ctx);
      const note = rotationNote(panel.run.gemms.wgrad);
      const errorNote = wgradErrorNote(panel.run);
      const scope = errorNote && ` · ${errorNote}`;
      panel.title.textContent = `${panel.run.name} — ${layer ?? 'no layers'} · wgrad ${panel.run.gemms.wgrad}${note ? ` (${note})` : ''}${scope}`;
      const detail = layer === null ? undefined : this.ctx.detail(panel.run.runId, layer, 'wgrad', 'dy');
      const color = this.ctx.color(panel.run.runId);
      const lag1 = detail ? points(detail.steps, detail.lag1Cos) : [];
      const lagK = detail ? points(detail.steps, detail.lagCos) : [];
      const floor = cosineNoiseFloor(panel.run.sketchSize ?? 0);
      const muted = this.ctx.theme.muted;
      const floorLines = (x0: number, x1: number): LineDataset[] =>
        floor === null || !(x1 >= x0) ? [] : [1, -1].map((sign) => ({ label: sign > 0 ? 'noise floor' : '', data: [{ x: x0, y: sign * floor }, { x: x1, y: sign * floor }], borderColor: muted, borderDash: [2, 3], borderWidth: 1 }));
      const floorLegend = floor === null ? [] : [{ label: `sketch noise floor ±2/√n = ±${formatNumber(floor)} (n = ${panel.run.sketchSize})`, color: muted, dashed: true }];
      const steps = detail?.steps ?? [];
      const overTime: LineDataset[] = [
        { label: 'lag 1', data: lag1, borderColor: color, pointRadius: 2 },
        { label: `lag ${state.lag}`, data: lagK, borderColor: withAlpha(color, 0.7), borderDash: [5, 4], pointRadius: 2 },
        ...floorLines(steps[0] ?? 0, steps[steps.length - 1] ?? 0),
      ];
      panel.overTime.data.datasets = overTime;
      panel.overTime.update('none');
      setLegend(panel.overTimeLegend, [{ label: lag1Label(detail?.steps.length ?? 0, lag1.length), color }, { label: `lag ${state.lag} (sketch)`, color, dashed: true }, ...floorLegend]);
      const auto = detail ? detail.autocorr.map((y, lag) => (y === null ? null : { x: lag, y })).filter((p): p is XY => p !== null) : [];
      panel.autocorr.data.datasets = [{ label: 'autocorrelation', data: auto, borderColor: color, backgroundColor: withAlpha(color, 0.2), pointRadius: 2 }, ...floorLines(0, Math.max(1, auto.length - 1))];
      panel.autocorr.update('none');
      setLegend(panel.autocorrLegend, [{ label: detail && detail.autocorr.length === 0 ? 'no Wgrad error sketches for this layer' : `${panel.run.name} · autocorrelation`, color }, ...floorLegend]);
      if (detail) detail.steps.forEach((step, i) => this.csvRows.push([panel.run.runId, panel.run.name, layer, step, detail.lag1Cos[i] ?? null, detail.lagCos[i] ?? null]));
    }
  }

  csv() {
    return { name: 'wgrad-error-correlation.csv', header: ['run_id', 'run', 'layer', 'step', 'lag1_cos', `lag${this.ctx.state.lag}_cos`], rows: this.csvRows };
  }

  canvas(): HTMLCanvasElement | null {
    return this.panels[0]?.overTime.canvas ?? null;
  }

  destroy(): void {
    for (const panel of this.panels) {
      panel.overTime.destroy();
      panel.autocorr.destroy();
    }
  }
}

function points(xs: readonly number[], ys: readonly (number | null)[]): XY[] {
  const out: XY[] = [];
  for (let i = 0; i < xs.length; i++) if (ys[i] !== null && ys[i] !== undefined) out.push({ x: xs[i]!, y: ys[i]! });
  return out;
}

// Chart.js set up for streaming: no parsing (data arrive as {x, y}), no animation, points hidden,
// decimation done by us (min/max, so spikes survive) before data reach the chart.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Filler,
  LinearScale,
  LineController,
  LineElement,
  LogarithmicScale,
  PointElement,
  ScatterController,
  Tooltip,
  type ChartDataset,
  type Plugin,
} from 'chart.js';
import type { Theme } from './theme.js';

Chart.register(LineController, ScatterController, BarController, LineElement, PointElement, BarElement, LinearScale, LogarithmicScale, CategoryScale, Tooltip, Filler);

export type { Chart };
export type XY = { x: number; y: number };

/**
 * A canvas is opaque to screen readers (and to tests): after every update the chart describes its
 * axes, series and x tick labels in the canvas's aria-label, e.g. "loss (logarithmic) 2.9 to 7.1
 * against step 0 to 599; 3 series: a · train, …; x ticks 0, 100, …, 599"; while a tooltip shows,
 * its text is the canvas's aria-description ("step 102; a · train: 3.1").
 */
const describeAxes: Plugin = {
  id: 'mxscopeDescribe',
  afterUpdate(chart) {
    const axis = (id: string): string => {
      const scale = chart.scales[id];
      if (!scale) return '';
      const title = (scale.options as { title?: { text?: string } }).title?.text ?? id;
      const kind = scale.type === 'logarithmic' ? ' (logarithmic)' : '';
      return scale.type === 'category' ? `${title} ${chart.data.labels?.length ?? 0} categories` : `${title}${kind} ${tidyTick(scale.min)} to ${tidyTick(scale.max)}`;
    };
    const names = chart.data.datasets.map((dataset) => dataset.label ?? '').filter((label) => label !== '');
    const ticks = chart.scales.x?.type === 'category' ? [] : (chart.scales.x?.ticks ?? []).map((tick) => tick.label);
    chart.canvas.setAttribute('role', 'img');
    chart.canvas.setAttribute('aria-label', `${axis('y')} against ${axis('x')}; ${names.length} series: ${names.join(', ')}${ticks.length > 0 ? `; x ticks ${ticks.join(', ')}` : ''}`);
  },
  afterDraw(chart) {
    const tooltip = (chart as Chart & { tooltip?: { opacity: number; title: string[]; body: { lines: string[] }[] } }).tooltip;
    if (tooltip && tooltip.opacity > 0 && tooltip.title.length > 0) chart.canvas.setAttribute('aria-description', [...tooltip.title, ...tooltip.body.flatMap((body) => body.lines)].join('; '));
    else chart.canvas.removeAttribute('aria-description');
  },
};

function xTitleOf(chart: Chart): string {
  return (chart.options.scales?.x as { title?: { text?: string } } | undefined)?.title?.text ?? '';
}

function tidyTick(value: number): string {
  return Number.isInteger(value) ? String(value) : tidy(value);
}

function tidy(value: number): string {
  return Number.isFinite(value) ? String(Number(value.toPrecision(4))) : String(value);
}
export type LineDataset = ChartDataset<'line', XY[]>;

/**
 * Width of long, decimated lines (a run's loss, gradient norm, learning rate): a 1 px line is a
 * hairline to Skia, a wider one is stroked into an outline and filled. With min/max decimation's
 * ~2 points per pixel that outline overlaps itself everywhere: measured in headless Chromium's
 * software raster, 4,600 points cost ~1-2 ms at 1 px against 30-60 ms at 1.5 px, every frame.
 */
export const DENSE_LINE_WIDTH = 1;

export interface AxisOptions {
  xTitle: string;
  yTitle: string;
  logY?: boolean;
  /** Shown x range (zoom); the data's extent when absent. */
  xRange?: [number, number];
  /** Fixed y range (e.g. [-1, 1] for cosines), so side-by-side charts read on the same scale. */
  yRange?: [number, number];
  /** x values are whole numbers (steps): no 31.5 ticks when zoomed in (nor a zoom's fractional ends as ticks). */
  integerX?: boolean;
}

function axes(theme: Theme, options: AxisOptions) {
  const grid = { color: theme.grid, drawTicks: false };
  const ticks = { color: theme.muted, maxTicksLimit: 8, padding: 4 };
  const title = (text: string) => ({ display: true, text, color: theme.muted });
  return {
    // bounds 'data': the x axis ends where the data end (not at the next round tick: 154k tokens, not 200k).
    x: { type: 'linear' as const, bounds: 'data' as const, grid, ticks: options.integerX ? { ...ticks, precision: 0, includeBounds: false } : ticks, title: title(options.xTitle), border: { color: theme.grid }, min: options.xRange?.[0], max: options.xRange?.[1] },
    y: {
      type: options.logY ? ('logarithmic' as const) : ('linear' as const),
      grid,
      ticks,
      title: title(options.yTitle),
      border: { color: theme.grid },
      min: options.yRange?.[0],
      max: options.yRange?.[1],
    },
  };
}

export function lineChart(canvas: HTMLCanvasElement, theme: Theme, options: AxisOptions): Chart<'line', XY[]> {
  return new Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: {
      parsing: false,
      normalized: true,
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      spanGaps: false,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      elements: { point: { radius: 0, hitRadius: 4 }, line: { borderWidth: 1.5, tension: 0 } },
      scales: axes(theme, options),
      plugins: {
        tooltip: {
          enabled: true,
          // "step 102", not a bare "102": the title names the x axis.
          callbacks: { title: (items) => (items[0] ? `${xTitleOf(items[0].chart)} ${tidyTick(items[0].parsed.x ?? NaN)}` : '') },
        },
      },
    },
    plugins: [describeAxes as Plugin<'line'>],
  });
}

export function setAxes(chart: Chart<'line', XY[]>, theme: Theme, options: AxisOptions): void {
  chart.options.scales = axes(theme, options);
}

export function barChart(canvas: HTMLCanvasElement, theme: Theme, options: AxisOptions): Chart<'bar', number[], string> {
  const scales = axes(theme, options);
  return new Chart(canvas, {
    type: 'bar',
    data: { labels: [], datasets: [] },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: { x: { ...scales.x, type: 'category', grid: { display: false } }, y: { ...scales.y, beginAtZero: true } },
      datasets: { bar: { categoryPercentage: 1, barPercentage: 0.95, grouped: false } },
      plugins: { tooltip: { enabled: true } },
    },
    plugins: [describeAxes as Plugin<'bar'>],
  });
}

// What every view gets: the data, the UI state and ways to change it, the theme, and layer details
// (cached, or requested from the host and redrawn when they arrive).
import type { GemmKind } from '../../src/protocol/config.js';
import type { Operand } from '../../src/protocol/telemetry.js';
import type { GridMetric, LayerDetailMessage, LayerGridMessage, RunInfo, WebviewToHost } from '../../src/protocol/webview.js';
import type { UiState } from './model/ui-state.js';
import type { DashboardData } from './data.js';
import type { Theme } from './theme.js';

export interface Context {
  readonly data: DashboardData;
  readonly state: UiState;
  readonly theme: Theme;
  /** Change UI state; `remount` rebuilds the view (structure changed), else it updates in place. */
  update(patch: Partial<UiState>, remount?: boolean): void;
  post(message: WebviewToHost): void;
  /** The cached detail, or undefined after asking the host (the view updates when it arrives). */
  detail(runId: string, layer: string, gemm: GemmKind, operand: Operand): LayerDetailMessage | undefined;
  /** The cached layer × step grid, or undefined after asking the host. */
  grid(runId: string, metric: GridMetric, gemm: GemmKind): LayerGridMessage | undefined;
  /** The runs on screen: compared runs, or the chosen runs (all when none chosen). */
  shownRuns(): RunInfo[];
  color(runId: string): string;
}

/**
 * One tab's content. The constructor builds the DOM only; the dashboard calls update() once the
 * root is in the document (a canvas measured while detached is 0×0 and would draw blank).
 */
export interface View {
  readonly root: HTMLElement;
  /** Redraw from the current data and state. */
  update(): void;
  destroy(): void;
  /** The data behind the current chart, for CSV export. */
  csv(): { name: string; header: string[]; rows: (string | number | null)[][] };
  /** The chart canvas to export as PNG (null: nothing drawn). */
  canvas(): HTMLCanvasElement | null;
}

export function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A titled chart box: a fixed-height wrapper Chart.js can size itself in. */
export function chartBox(title: string, height: number): { box: HTMLElement; canvas: HTMLCanvasElement; legend: HTMLElement } {
  const box = element('section', 'chart-box');
  box.append(element('h3', undefined, title));
  const wrap = element('div', 'chart-wrap');
  wrap.style.height = `${height}px`;
  const canvas = element('canvas');
  wrap.append(canvas);
  const legend = element('div', 'legend');
  box.append(wrap, legend);
  return { box, canvas, legend };
}

/**
 * Make a non-button element (a table row, a list item) act like a button: reachable with Tab,
 * Enter or Space runs the action, as a click does.
 */
export function activatable<T extends HTMLElement>(node: T, action: () => void, title: string): T {
  node.tabIndex = 0;
  node.classList.add('clickable');
  node.title = title;
  node.setAttribute('aria-label', title);
  node.addEventListener('click', action);
  node.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' && event.key !== ' ') return;
    event.preventDefault();
    action();
  });
  return node;
}

export function setLegend(legend: HTMLElement, entries: readonly { label: string; color: string; dashed?: boolean }[]): void {
  legend.replaceChildren(
    ...entries.map((entry) => {
      const item = element('span', 'legend-item');
      const swatch = element('span', entry.dashed ? 'swatch dashed' : 'swatch');
      swatch.style.borderColor = entry.color;
      item.append(swatch, document.createTextNode(entry.label));
      return item;
    }),
  );
}

// One number format for the whole dashboard: the layer metrics' own (src/protocol/layer-metrics.ts).
export { formatNumber } from '../../src/protocol/layer-metrics.js';

export function formatTokens(tokens: number | null): string {
  if (tokens === null) return 'not reached';
  if (tokens >= 1e9) return `${(tokens / 1e9).toFixed(2)} B`;
  if (tokens >= 1e6) return `${(tokens / 1e6).toFixed(2)} M`;
  if (tokens >= 1e3) return `${(tokens / 1e3).toFixed(1)} k`;
  return String(Math.round(tokens));
}

// Export PNG of whatever tab is shown, readable outside VS Code: a title (the tab and the runs in
// their colours), then the tab's chart on the theme background with its legend drawn under it; a
// tab without a chart (tables, alerts) is drawn as text rows from its own DOM.
import { element } from './context.js';
import type { Theme } from './theme.js';

const PAD = 16;
const LINE = 18;
/** Rows of a table or list drawn at most (the CSV has all of them). */
const MAX_ROWS = 60;

export interface PngContent {
  title: string;
  runs: readonly { name: string; color: string }[];
  /** The tab's main chart, if it has one. */
  chart: HTMLCanvasElement | null;
  /** The tab's root element: its legend, tables and alert list are read from here. */
  root: HTMLElement;
}

export function composePng(content: PngContent, theme: Theme): string {
  const ratio = content.chart ? content.chart.width / Math.max(1, content.chart.clientWidth || content.chart.width) : window.devicePixelRatio || 1;
  const legend = [...content.root.querySelectorAll<HTMLElement>('.legend-item')].slice(0, 40).map((item) => ({
    label: item.textContent ?? '',
    color: item.querySelector<HTMLElement>('.swatch')?.style.borderColor || theme.foreground,
  }));
  const rows = textRows(content.root);
  const width = content.chart ? content.chart.width / ratio : 900;
  const chartHeight = content.chart ? content.chart.height / ratio : 0;
  const legendLines = Math.ceil(legend.length / 3);
  const height = PAD + LINE * 2 + (chartHeight ? chartHeight + PAD : 0) + legendLines * LINE + rows.length * LINE + PAD;
  const out = element('canvas');
  out.width = Math.round(width * ratio);
  out.height = Math.round(height * ratio);
  const g = out.getContext('2d')!;
  g.scale(ratio, ratio);
  g.fillStyle = theme.background;
  g.fillRect(0, 0, width, height);
  g.textBaseline = 'middle';
  g.font = 'bold 14px sans-serif';
  g.fillStyle = theme.foreground;
  let y = PAD + LINE / 2;
  g.fillText(content.title, PAD, y);
  y += LINE;
  g.font = '12px sans-serif';
  let x = PAD;
  for (const run of content.runs) {
    x = swatchLabel(g, x, y, run.color, run.name, theme) + 14;
  }
  y += LINE / 2;
  if (content.chart) {
    g.drawImage(content.chart, 0, y, width, chartHeight);
    y += chartHeight + PAD / 2;
  }
  const columnWidth = (width - 2 * PAD) / 3;
  legend.forEach((entry, i) => {
    const row = Math.floor(i / 3);
    swatchLabel(g, PAD + (i % 3) * columnWidth, y + LINE * row + LINE / 2, entry.color, entry.label, theme);
  });
  y += legendLines * LINE;
  g.font = '12px monospace';
  for (const [i, row] of rows.entries()) {
    g.fillStyle = i === 0 && content.root.querySelector('table') ? theme.muted : theme.foreground;
    g.fillText(row, PAD, y + LINE / 2, width - 2 * PAD);
    y += LINE;
  }
  return out.toDataURL('image/png');
}

function swatchLabel(g: CanvasRenderingContext2D, x: number, y: number, color: string, label: string, theme: Theme): number {
  g.fillStyle = color;
  g.fillRect(x, y - 2, 16, 4);
  g.fillStyle = theme.foreground;
  g.fillText(label, x + 22, y);
  return x + 22 + g.measureText(label).width;
}

/** A table (header + rows, cells padded into columns) or an alert list, as lines of text. */
function textRows(root: HTMLElement): string[] {
  const table = root.querySelector('table');
  if (table) {
    const cells = [...table.querySelectorAll('tr')].slice(0, MAX_ROWS + 1).map((tr) => [...tr.children].map((cell) => (cell.textContent ?? '').trim()));
    const widths: number[] = [];
    for (const row of cells) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, Math.min(40, cell.length))));
    return cells.map((row) => row.map((cell, i) => cell.slice(0, 40).padEnd(widths[i]!)).join('  '));
  }
  return [...root.querySelectorAll('ul.alerts li')].slice(0, MAX_ROWS).map((li) => (li.textContent ?? '').trim());
}

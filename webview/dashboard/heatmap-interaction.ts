// Pointer and keyboard on a heatmap canvas: hovering shows the cell's value in a tooltip, a click
// picks the cell (e.g. jumps to its step), and the canvas is reachable with Tab, where the arrow
// keys move the pick (left/right: step, up/down: row) and Enter opens it like a click.
import { element } from './context.js';
import { cellAt, type GridGeometry } from './heatmap-canvas.js';

export interface HeatmapHandlers {
  /** The geometry of the last draw (null: nothing drawn). */
  geometry(): GridGeometry | null;
  /** Tooltip text of a cell, or null when it holds nothing. */
  describe(column: number, row: number): string | null;
  /** A click (or Enter) on a cell. */
  pick(column: number, row: number): void;
  /** Arrow keys: move the current pick by (columns, rows). */
  move(columns: number, rows: number): void;
}

/** Wrap `canvas` in a box holding its tooltip, and wire the handlers; returns the box. */
export function interactiveHeatmap(canvas: HTMLCanvasElement, label: string, handlers: HeatmapHandlers): HTMLElement {
  const box = element('div', 'heatmap-box');
  const tip = element('div', 'heat-tip');
  tip.setAttribute('role', 'tooltip');
  tip.hidden = true;
  box.append(canvas, tip);
  canvas.tabIndex = 0;
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', label);
  canvas.title = `${label}: hover for values, click to open a step; arrow keys move, Enter opens`;
  let focused: { column: number; row: number } | null = null;
  const show = (cell: { column: number; row: number } | null, x: number, y: number): void => {
    const text = cell ? handlers.describe(cell.column, cell.row) : null;
    tip.hidden = text === null;
    if (text === null) return;
    tip.textContent = text;
    // Keep the tip inside the box: flip to the left of the pointer near the right edge.
    const flip = x > box.clientWidth * 0.6;
    tip.style.left = flip ? '' : `${x + 12}px`;
    tip.style.right = flip ? `${box.clientWidth - x + 12}px` : '';
    tip.style.top = `${Math.max(0, y - 28)}px`;
  };
  canvas.addEventListener('mousemove', (event) => show(cellAt(handlers.geometry(), event.offsetX, event.offsetY), event.offsetX, event.offsetY));
  canvas.addEventListener('mouseleave', () => (tip.hidden = true));
  canvas.addEventListener('click', (event) => {
    const cell = cellAt(handlers.geometry(), event.offsetX, event.offsetY);
    if (!cell) return;
    focused = cell;
    handlers.pick(cell.column, cell.row);
  });
  canvas.addEventListener('blur', () => (tip.hidden = true));
  canvas.addEventListener('keydown', (event) => {
    const geometry = handlers.geometry();
    if (!geometry) return;
    const moves: Record<string, [number, number]> = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    const delta = moves[event.key];
    if (!delta && event.key !== 'Enter') return;
    event.preventDefault();
    focused ??= { column: geometry.columns - 1, row: 0 };
    if (delta) {
      focused = { column: clamp(focused.column + delta[0], geometry.columns), row: clamp(focused.row + delta[1], geometry.rows) };
      handlers.move(delta[0], delta[1]);
    } else handlers.pick(focused.column, focused.row);
    const x = geometry.left + ((focused.column + 0.5) * geometry.width) / geometry.columns;
    const y = geometry.top + ((focused.row + 0.5) * geometry.height) / geometry.rows;
    show(focused, x, y);
  });
  return box;
}

function clamp(value: number, count: number): number {
  return Math.max(0, Math.min(count - 1, value));
}

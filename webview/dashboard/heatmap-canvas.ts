// Draws heatmaps on a canvas: a grid of cells becomes one small ImageData (one pixel per cell)
// scaled up without smoothing, so 10,000 steps × 40 rows cost one putImageData and one drawImage,
// not 400,000 fillRects. Two kinds share the painter: step × exponent (block-scale histograms over
// time) and layer × step (any per-layer metric). Each draw returns its geometry, so the pointer and
// the keyboard can find the cell under them (tooltips, click-through).
import { fitRowLabel } from './model/row-label.js';
import type { HeatmapGrid } from './model/heatmap.js';
import { rgb, type Theme } from './theme.js';

const MARGIN = { right: 8, top: 6, bottom: 18 };

/** One grid to paint: values in [0, 1] (NaN: no data), row 0 at the top. */
export interface ShadeGrid {
  columns: number;
  rows: number;
  /** shade[c * rows + r] */
  shade: Float32Array;
  rowLabels: readonly string[];
  /** First step in each column (x labels). */
  columnStep: readonly number[];
  /** Width of the row-label margin in CSS pixels. */
  labelWidth: number;
}

/** Where the cells landed on the canvas (CSS pixels), to map a pointer back to a cell. */
export interface GridGeometry {
  left: number;
  top: number;
  width: number;
  height: number;
  columns: number;
  rows: number;
}

export function cellAt(geometry: GridGeometry | null, x: number, y: number): { column: number; row: number } | null {
  if (!geometry) return null;
  const fx = (x - geometry.left) / geometry.width;
  const fy = (y - geometry.top) / geometry.height;
  if (fx < 0 || fx >= 1 || fy < 0 || fy >= 1) return null;
  return { column: Math.floor(fx * geometry.columns), row: Math.floor(fy * geometry.rows) };
}

export function paintGrid(canvas: HTMLCanvasElement, grid: ShadeGrid, theme: Theme, markerColumn: number | null): GridGeometry | null {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const g = canvas.getContext('2d')!;
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const left = grid.labelWidth;
  const plotW = width - left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  if (grid.columns === 0 || grid.rows === 0 || plotW <= 0 || plotH <= 0) return null;

  const low = rgb(theme.heatLow);
  const high = rgb(theme.heatHigh);
  const none = rgb(theme.grid);
  const image = new ImageData(grid.columns, grid.rows);
  for (let c = 0; c < grid.columns; c++) {
    for (let r = 0; r < grid.rows; r++) {
      const t = grid.shade[c * grid.rows + r]!;
      const p = (r * grid.columns + c) * 4;
      const [a, b] = Number.isNaN(t) ? [none, none] : [low, high];
      const k = Number.isNaN(t) ? 0.35 : t;
      image.data[p] = a[0] + (b[0] - a[0]) * k;
      image.data[p + 1] = a[1] + (b[1] - a[1]) * k;
      image.data[p + 2] = a[2] + (b[2] - a[2]) * k;
      image.data[p + 3] = Number.isNaN(t) ? 90 : 255;
    }
  }
  const cells = document.createElement('canvas');
  cells.width = grid.columns;
  cells.height = grid.rows;
  cells.getContext('2d')!.putImageData(image, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(cells, left, MARGIN.top, plotW, plotH);

  g.fillStyle = theme.muted;
  g.font = '10px sans-serif';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  const rowH = plotH / grid.rows;
  const every = Math.max(1, Math.ceil(12 / rowH));
  for (let r = 0; r < grid.rows; r += every) g.fillText(fitRowLabel(grid.rowLabels[r] ?? '', left - 4, (text) => g.measureText(text).width), left - 3, MARGIN.top + (r + 0.5) * rowH);
  g.textBaseline = 'top';
  g.textAlign = 'left';
  g.fillText(`step ${grid.columnStep[0]}`, left, MARGIN.top + plotH + 4);
  g.textAlign = 'right';
  g.fillText(`${grid.columnStep[grid.columns - 1]}`, left + plotW, MARGIN.top + plotH + 4);
  if (markerColumn !== null) {
    const x = left + ((markerColumn + 0.5) * plotW) / grid.columns;
    g.strokeStyle = theme.foreground;
    g.lineWidth = 1;
    g.setLineDash([3, 3]);
    g.beginPath();
    g.moveTo(x, MARGIN.top);
    g.lineTo(x, MARGIN.top + plotH);
    g.stroke();
    g.setLineDash([]);
  }
  return { left, top: MARGIN.top, width: plotW, height: plotH, columns: grid.columns, rows: grid.rows };
}


/** Grid row r is exponent minExp + r; the image spans exponents lo..hi (shared by side-by-side panels). */
export interface ExponentRange {
  minExp: number;
  lo: number;
  hi: number;
}

/** The step × exponent heatmap; its rows are exponents hi (top) .. lo. */
export function drawHeatmap(canvas: HTMLCanvasElement, grid: HeatmapGrid, range: ExponentRange, theme: Theme, markerColumn: number | null): GridGeometry | null {
  const rows = range.hi - range.lo + 1;
  const shade = new Float32Array(grid.columns * Math.max(0, rows));
  const scale = grid.max > 0 ? 1 / grid.max : 0;
  for (let c = 0; c < grid.columns; c++) {
    for (let e = 0; e < grid.rows; e++) {
      // sqrt: the tails (a few blocks at extreme exponents) matter and would vanish on a linear ramp.
      shade[c * rows + (range.hi - (range.minExp + e))] = Math.sqrt(grid.cells[c * grid.rows + e]! * scale);
    }
  }
  const rowLabels = Array.from({ length: Math.max(0, rows) }, (_, r) => `2^${range.hi - r}`);
  return paintGrid(canvas, { columns: grid.columns, rows: Math.max(0, rows), shade, rowLabels, columnStep: grid.columnStep, labelWidth: 42 }, theme, markerColumn);
}

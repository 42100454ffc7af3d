// Draws a step × exponent heatmap: the binned grid becomes one small ImageData (one pixel per cell)
// scaled up without smoothing, so 10,000 steps × 40 exponents costs one putImageData and one
// drawImage, not 400,000 fillRects.
import type { HeatmapGrid } from './model/heatmap.js';
import { rgb, type Theme } from './theme.js';

const MARGIN = { left: 36, right: 8, top: 6, bottom: 18 };

/** Grid row r is exponent minExp + r; the image spans exponents lo..hi (shared by side-by-side panels). */
export interface ExponentRange {
  minExp: number;
  lo: number;
  hi: number;
}

export function drawHeatmap(canvas: HTMLCanvasElement, grid: HeatmapGrid, range: ExponentRange, theme: Theme, markerColumn: number | null): void {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const g = canvas.getContext('2d')!;
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  if (grid.columns === 0 || grid.rows === 0 || plotW <= 0 || plotH <= 0) return;

  const low = rgb(theme.heatLow);
  const high = rgb(theme.heatHigh);
  const rows = range.hi - range.lo + 1;
  const image = new ImageData(grid.columns, rows);
  for (let p = 0; p < image.data.length; p += 4) {
    image.data[p] = low[0];
    image.data[p + 1] = low[1];
    image.data[p + 2] = low[2];
    image.data[p + 3] = 255;
  }
  const scale = grid.max > 0 ? 1 / grid.max : 0;
  for (let c = 0; c < grid.columns; c++) {
    for (let e = 0; e < grid.rows; e++) {
      // sqrt: the tails (a few blocks at extreme exponents) matter and would vanish on a linear ramp.
      const t = Math.sqrt(grid.cells[c * grid.rows + e]! * scale);
      const p = ((range.hi - (range.minExp + e)) * grid.columns + c) * 4; // highest exponent at the top
      image.data[p] = low[0] + (high[0] - low[0]) * t;
      image.data[p + 1] = low[1] + (high[1] - low[1]) * t;
      image.data[p + 2] = low[2] + (high[2] - low[2]) * t;
    }
  }
  const cells = document.createElement('canvas');
  cells.width = grid.columns;
  cells.height = rows;
  cells.getContext('2d')!.putImageData(image, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(cells, MARGIN.left, MARGIN.top, plotW, plotH);

  g.fillStyle = theme.muted;
  g.font = '10px sans-serif';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  const rowH = plotH / rows;
  const every = Math.max(1, Math.ceil(12 / rowH));
  for (let r = 0; r < rows; r += every) g.fillText(`2^${range.lo + r}`, MARGIN.left - 3, MARGIN.top + plotH - (r + 0.5) * rowH);
  g.textBaseline = 'top';
  g.textAlign = 'left';
  g.fillText(`step ${grid.columnStep[0]}`, MARGIN.left, MARGIN.top + plotH + 4);
  g.textAlign = 'right';
  g.fillText(`${grid.columnStep[grid.columns - 1]}`, MARGIN.left + plotW, MARGIN.top + plotH + 4);
  if (markerColumn !== null) {
    const x = MARGIN.left + ((markerColumn + 0.5) * plotW) / grid.columns;
    g.strokeStyle = theme.foreground;
    g.lineWidth = 1;
    g.setLineDash([3, 3]);
    g.beginPath();
    g.moveTo(x, MARGIN.top);
    g.lineTo(x, MARGIN.top + plotH);
    g.stroke();
    g.setLineDash([]);
  }
}

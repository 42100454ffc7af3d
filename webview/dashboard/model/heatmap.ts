// Step × exponent heatmap binning: many stats steps fold into at most `columns` pixel columns, each
// cell the mean fraction of blocks at that exponent, so a 10,000-step history draws as one small
// image without per-step work in the browser's paint.

export interface HeatmapInput {
  steps: readonly number[];
  exponents: number;
  /** counts[i * exponents + e] */
  counts: readonly number[];
}

export interface HeatmapGrid {
  columns: number;
  rows: number;
  /** cells[c * rows + e]: mean fraction of blocks at exponent row e over the steps in column c. */
  cells: Float32Array;
  /** The largest cell value (for colour scaling). */
  max: number;
  /** First step folded into each column. */
  columnStep: number[];
}

export function binHeatmap(input: HeatmapInput, maxColumns: number): HeatmapGrid {
  const samples = input.steps.length;
  const rows = input.exponents;
  const columns = Math.max(0, Math.min(samples, Math.floor(maxColumns)));
  const cells = new Float32Array(columns * rows);
  const perColumn = new Uint32Array(columns);
  const columnStep: number[] = new Array(columns).fill(0);
  for (let i = 0; i < samples; i++) {
    const c = Math.min(columns - 1, Math.floor((i * columns) / samples));
    if (perColumn[c]++ === 0) columnStep[c] = input.steps[i]!;
    let total = 0;
    for (let e = 0; e < rows; e++) total += input.counts[i * rows + e]!;
    if (total === 0) continue;
    for (let e = 0; e < rows; e++) cells[c * rows + e]! += input.counts[i * rows + e]! / total;
  }
  let max = 0;
  for (let c = 0; c < columns; c++) {
    const n = perColumn[c]!;
    for (let e = 0; e < rows; e++) {
      const v = (cells[c * rows + e]! /= n);
      if (v > max) max = v;
    }
  }
  return { columns, rows, cells, max, columnStep };
}

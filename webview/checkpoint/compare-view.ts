// Two checkpoints: matched tensors with their relative change and scale-histogram shift (largest
// tensor first), the tensors only one side has, and the selected tensor's two histograms overlaid.
import { formatBytes } from '../../src/shared/checkpoint-format.js';
import type { CheckpointComparison, TensorDiff, TensorSummary } from '../../src/protocol/checkpoint-report.js';
import { element } from '../dashboard/context.js';
import type { Theme } from '../dashboard/theme.js';
import { drawHistogram } from './histogram.js';
import { breakableName, renderTable, type Column, type TableState } from './table.js';

const shape = (dims: readonly number[]) => `[${dims.join(', ')}]`;
/** 0.799 rather than 7.99e-1; exponents only for very small or large values. */
const readable = (value: number) => (value !== 0 && (Math.abs(value) < 1e-3 || Math.abs(value) >= 1e5) ? value.toExponential(2) : String(Number(value.toPrecision(3))));
const signed = (value: number | null | undefined, digits: number) => (value === null || value === undefined || Number.isNaN(value) ? '-' : `${value > 0 ? '+' : ''}${value.toFixed(digits)}`);

function columns(largestChange: number, theme: Theme): Column<TensorDiff>[] {
  return [
    { title: 'Tensor', text: (d) => d.name, sortKey: (d) => d.name, cell: (d, td) => breakableName(td, d.name) },
    { title: 'Shape', text: (d) => shape(d.a.shape), sortKey: (d) => d.a.shape.reduce((p, n) => p * n, 1), numeric: true },
    { title: 'Size', text: (d) => formatBytes(Math.max(d.a.bytes, d.b.bytes)), sortKey: (d) => Math.max(d.a.bytes, d.b.bytes), numeric: true },
    {
      title: 'Relative change',
      tooltip: '‖A − B‖ / ‖A‖ over every element',
      text: (d) => (d.relativeChange === null ? '-' : readable(d.relativeChange)),
      sortKey: (d) => d.relativeChange,
      numeric: true,
      cell: (d, td) => {
        if (d.relativeChange === null || largestChange === 0) return;
        const bar = element('span', 'bar');
        bar.style.width = `${Math.max(1, (48 * d.relativeChange) / largestChange)}px`;
        bar.style.background = theme.palette[1];
        td.prepend(bar);
      },
    },
    { title: 'Scale shift', tooltip: 'Mean block-scale exponent of B minus A, in binades', text: (d) => signed(d.scaleShift?.meanShift, 3), sortKey: (d) => d.scaleShift?.meanShift ?? null, numeric: true },
    { title: 'Scale EMD', tooltip: "Earth mover's distance between the scale histograms, in binades", text: (d) => (d.scaleShift ? d.scaleShift.emd.toFixed(3) : '-'), sortKey: (d) => d.scaleShift?.emd ?? null, numeric: true },
    { title: 'Note', text: (d) => d.note ?? '', sortKey: (d) => d.note ?? '' },
  ];
}

function oneSided(title: string, tensors: TensorSummary[]): HTMLElement {
  const box = element('section', 'one-sided');
  box.append(element('h3', undefined, `${title} (${tensors.length})`));
  if (tensors.length === 0) box.append(element('p', 'muted', 'none'));
  const list = element('ul');
  for (const t of tensors) list.append(element('li', undefined, `${t.name}  ${t.dtype} ${shape(t.shape)}  ${formatBytes(t.bytes)}`));
  box.append(list);
  return box;
}

function detail(diff: TensorDiff, theme: Theme, draws: (() => void)[]): HTMLElement {
  const box = element('section', 'detail');
  box.append(element('h3', undefined, diff.name));
  const shift = diff.scaleShift;
  if (!shift) {
    box.append(element('p', 'muted', diff.note ?? 'Not a weight matrix: no scale histograms.'));
    return box;
  }
  const legend = element('div', 'legend');
  for (const [label, color] of [['A', theme.palette[0]], ['B', theme.palette[1]]] as const) {
    const item = element('span', 'legend-item');
    const swatch = element('span', 'swatch');
    swatch.style.borderTopColor = color;
    item.append(swatch, `${label}: mean exponent ${shift[label === 'A' ? 'meanExpA' : 'meanExpB'].toFixed(2)}`);
    legend.append(item);
  }
  const canvas = element('canvas', 'histogram');
  box.append(legend, canvas);
  const series = [
    { histogram: shift.histogramA, color: theme.palette[0] },
    { histogram: shift.histogramB, color: theme.palette[1] },
  ];
  draws.push(() => drawHistogram(canvas, series, theme, { axis: true }));
  return box;
}

export function renderComparison(root: HTMLElement, comparison: CheckpointComparison, theme: Theme, state: TableState, onChange: (state: TableState) => void): (() => void)[] {
  const draws: (() => void)[] = [];
  const largest = Math.max(0, ...comparison.matched.map((d) => d.relativeChange ?? 0));
  // The selected tensor's detail opens right under its row, not below every row.
  root.append(renderTable(columns(largest, theme), comparison.matched, (d) => d.name, state, onChange, (d) => detail(d, theme, draws)));
  const sides = element('div', 'sides');
  sides.append(oneSided('Only in A', comparison.onlyInA), oneSided('Only in B', comparison.onlyInB));
  root.append(sides);
  return draws;
}

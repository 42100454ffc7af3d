// One checkpoint: every tensor with its MXFP4 figures, a scale sparkline per weight matrix, and the
// selected tensor's full scale histogram and details.
import { formatBytes, formatDb, formatPercent } from '../../src/shared/checkpoint-format.js';
import type { CheckpointReport, TensorReport } from '../../src/protocol/checkpoint-report.js';
import { element } from '../dashboard/context.js';
import type { Theme } from '../dashboard/theme.js';
import { drawHistogram, FLOOR_EXP, sparklineRange, type Series } from './histogram.js';
import { breakableName, renderTable, type Column, type TableState } from './table.js';

const shape = (dims: readonly number[]) => `[${dims.join(', ')}]`;

function columns(report: CheckpointReport, theme: Theme, sparklines: (() => void)[]): Column<TensorReport>[] {
  const block = report.options.hadamardBlock;
  // One exponent axis for every sparkline, so a tensor whose scales sit higher looks higher.
  const all: Series[] = report.tensors.flatMap((t) => (t.analysis ? [{ histogram: t.analysis.histogram, color: theme.palette[0] }] : []));
  const range = sparklineRange(all) ?? undefined;
  return [
    { title: 'Tensor', text: (t) => t.name, sortKey: (t) => t.name, cell: (t, td) => breakableName(td, t.name) },
    { title: 'dtype', text: (t) => t.dtype, sortKey: (t) => t.dtype },
    { title: 'Shape', text: (t) => shape(t.shape), sortKey: (t) => t.elements, numeric: true },
    { title: 'Size', text: (t) => formatBytes(t.bytes), sortKey: (t) => t.bytes, numeric: true },
    {
      title: range ? `Scale exponents ${range[0]} … ${range[1]}` : 'Scale exponents',
      tooltip: `E8M0 block-scale histogram (exponent of 2) over every block of the tensor, all rows on one axis; blocks at 2^${FLOOR_EXP} (zeros) are left off it, the tensor's detail shows them`,
      text: () => '',
      sortKey: (t) => t.analysis?.medianScaleExp ?? null,
      cell: (t, td) => {
        if (!t.analysis) return;
        const canvas = element('canvas', 'sparkline');
        td.append(canvas);
        const histogram = t.analysis.histogram;
        const atFloor = histogram.counts[FLOOR_EXP - histogram.minExp] ?? 0;
        if (atFloor > 0) td.title = `${atFloor} of ${t.analysis.blocks} blocks at 2^${FLOOR_EXP} (zeros, or values under 2^-125): not drawn here`;
        sparklines.push(() => drawHistogram(canvas, [{ histogram, color: theme.palette[0] }], theme, { axis: false, ...(range ? { range } : {}) }));
      },
    },
    { title: 'Median', tooltip: 'Median block-scale exponent', text: (t) => (t.analysis?.medianScaleExp ?? '-').toString(), sortKey: (t) => t.analysis?.medianScaleExp ?? null, numeric: true },
    { title: 'Saturated', tooltip: 'Elements clamped to ±6·scale', text: (t) => formatPercent(t.analysis?.saturatedFrac ?? null), sortKey: (t) => t.analysis?.saturatedFrac ?? null, numeric: true },
    { title: 'Flushed', tooltip: 'Non-zero elements that quantize to 0', text: (t) => formatPercent(t.analysis?.flushedFrac ?? null), sortKey: (t) => t.analysis?.flushedFrac ?? null, numeric: true },
    { title: 'SQNR dB', tooltip: 'MXFP4 without rotation', text: (t) => formatDb(t.analysis?.sqnr?.noRotationDb ?? null), sortKey: (t) => t.analysis?.sqnr?.noRotationDb ?? null, numeric: true },
    { title: `SQNR H${block} dB`, tooltip: `MXFP4 after a deterministic Hadamard rotation of block ${block}`, text: (t) => formatDb(t.analysis?.sqnr?.hadamardDb ?? null), sortKey: (t) => t.analysis?.sqnr?.hadamardDb ?? null, numeric: true },
    { title: 'NVFP4 dB', tooltip: 'NVFP4 (16-element blocks, E4M3 block scales, FP32 tensor scale), no rotation', text: (t) => formatDb(t.analysis?.sqnr?.formats?.nvfp4.db ?? null), sortKey: (t) => t.analysis?.sqnr?.formats?.nvfp4.db ?? null, numeric: true },
    { title: 'MXFP8 dB', tooltip: 'MXFP8 E4M3 (32-element blocks, E8M0 scales), no rotation', text: (t) => formatDb(t.analysis?.sqnr?.formats?.mxfp8.db ?? null), sortKey: (t) => t.analysis?.sqnr?.formats?.mxfp8.db ?? null, numeric: true },
    {
      title: 'Outlier blocks',
      tooltip: `Blocks whose scale is ≥ ${report.options.outlierBinades} binades above the median`,
      text: (t) => (t.analysis ? String(t.analysis.outlierBlocks) : '-'),
      sortKey: (t) => (t.analysis ? t.analysis.outlierBlocks / t.analysis.blocks : null),
      numeric: true,
    },
  ];
}

function detail(tensor: TensorReport, report: CheckpointReport, theme: Theme, draws: (() => void)[]): HTMLElement {
  const box = element('section', 'detail');
  box.append(element('h3', undefined, tensor.name));
  const analysis = tensor.analysis;
  if (!analysis) {
    box.append(element('p', 'muted', `${tensor.dtype} ${shape(tensor.shape)}: no MXFP4 analysis (${tensor.skipped ?? 'not a weight matrix'}).`));
    return box;
  }
  if (tensor.note) box.append(element('p', 'muted', tensor.note));
  const canvas = element('canvas', 'histogram');
  box.append(canvas);
  const median = analysis.medianScaleExp;
  const markers =
    median === null
      ? []
      : [
          { exp: median, label: `median ${median}`, color: theme.muted },
          { exp: median + report.options.outlierBinades, label: `outlier blocks ≥ ${median + report.options.outlierBinades}`, color: theme.warning, edge: true },
        ];
  draws.push(() => drawHistogram(canvas, [{ histogram: analysis.histogram, color: theme.palette[0] }], theme, { axis: true, markers }));
  const facts: [string, string][] = [
    ['Matrix', `${analysis.rows} × ${analysis.cols} (${analysis.blocks} blocks of 32 along the last dim)`],
    ['Scale exponents', analysis.histogram.counts.length ? `${analysis.histogram.minExp} … ${analysis.histogram.minExp + analysis.histogram.counts.length - 1}, median ${analysis.medianScaleExp}` : 'none'],
    ['NaN/Inf blocks', String(analysis.histogram.nanBlocks)],
    ['Outlier blocks', `${analysis.outlierBlocks} (${formatPercent(analysis.outlierBlocks / analysis.blocks)}): scale ≥ median + ${report.options.outlierBinades} binades`],
    ['Saturated / flushed', `${formatPercent(analysis.saturatedFrac)} / ${formatPercent(analysis.flushedFrac)}`],
  ];
  const sqnr = analysis.sqnr;
  if (sqnr) {
    facts.push(['SQNR, no rotation', `${formatDb(sqnr.noRotationDb)} dB`]);
    facts.push([
      `SQNR, Hadamard ${report.options.hadamardBlock}`,
      sqnr.hadamardSkipped ?? `${formatDb(sqnr.hadamardDb)} dB (saturated ${formatPercent(sqnr.hadamardSaturatedFrac)}, flushed ${formatPercent(sqnr.hadamardFlushedFrac)})`,
    ]);
    if (sqnr.formats) {
      const { nvfp4, mxfp8 } = sqnr.formats;
      facts.push(['SQNR, NVFP4', `${formatDb(nvfp4.db)} dB (saturated ${formatPercent(nvfp4.saturatedFrac)}, flushed ${formatPercent(nvfp4.flushedFrac)})`]);
      facts.push(['SQNR, MXFP8 E4M3', `${formatDb(mxfp8.db)} dB (saturated ${formatPercent(mxfp8.saturatedFrac)}, flushed ${formatPercent(mxfp8.flushedFrac)})`]);
    }
    facts.push(['SQNR measured on', sqnr.rowsUsed < analysis.rows ? `${sqnr.rowsUsed} evenly spaced rows of ${analysis.rows}` : 'every row']);
  }
  const list = element('dl', 'facts');
  for (const [term, value] of facts) list.append(element('dt', undefined, term), element('dd', undefined, value));
  box.append(list);
  return box;
}

export interface ReportViewState {
  table: TableState;
  filter: string;
}

/** Renders into `root`; returns the canvas draws to run once the elements are laid out. */
export function renderReport(root: HTMLElement, report: CheckpointReport, theme: Theme, state: ReportViewState, onChange: (state: ReportViewState) => void): (() => void)[] {
  const draws: (() => void)[] = [];
  const needle = state.filter.toLowerCase();
  const rows = report.tensors.filter((tensor) => tensor.name.toLowerCase().includes(needle));
  root.append(renderTable(columns(report, theme, draws), rows, (t) => t.name, state.table, (table) => onChange({ ...state, table }), (t) => detail(t, report, theme, draws)));
  if (rows.length === 0) root.append(element('p', 'muted', `No tensor name contains “${state.filter}”.`));
  // A selected tensor the filter hides keeps its detail, below the table.
  const selected = report.tensors.find((tensor) => tensor.name === state.table.selected);
  if (selected && !rows.includes(selected)) root.append(detail(selected, report, theme, draws));
  return draws;
}

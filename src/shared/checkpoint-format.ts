// Plain-text tables of an analysis or comparison, as mxscope-inspect prints them, and the JSON form.
import type { CheckpointComparison, CheckpointReport, TensorReport, TensorSummary } from '../protocol/checkpoint-report.js';

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

export function formatDb(db: number | null): string {
  if (db === null) return '-';
  return db === Infinity ? 'lossless' : db.toFixed(1);
}

export function formatPercent(fraction: number | null): string {
  if (fraction === null) return '-';
  const percent = fraction * 100;
  if (percent > 0 && percent < 0.01) return '<0.01%';
  return `${percent.toFixed(2)}%`;
}

function formatSigned(value: number | null, digits: number): string {
  if (value === null || Number.isNaN(value)) return '-';
  return `${value > 0 ? '+' : ''}${value.toFixed(digits)}`;
}

const shapeText = (shape: readonly number[]): string => `[${shape.join(',')}]`;

/** Columns padded to their widest cell; the columns listed in `right` are right-aligned (numbers). */
export function renderTable(header: string[], rows: string[][], right: ReadonlySet<number>): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells: string[]) => cells.map((cell, column) => (right.has(column) ? cell.padStart(widths[column]) : cell.padEnd(widths[column]))).join('  ').trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)].join('\n');
}

function scaleRange({ analysis }: TensorReport): string {
  if (!analysis || analysis.histogram.counts.length === 0) return '-';
  const { minExp, counts } = analysis.histogram;
  return `${minExp}..${minExp + counts.length - 1} (${analysis.medianScaleExp})`;
}

function note(tensor: TensorReport): string {
  if (!tensor.analysis) return tensor.skipped ?? '';
  const notes: string[] = tensor.note ? [tensor.note] : [];
  const { sqnr, histogram, rows } = tensor.analysis;
  if (histogram.nanBlocks > 0) notes.push(`${histogram.nanBlocks} NaN/Inf blocks`);
  if (sqnr?.hadamardSkipped) notes.push(sqnr.hadamardSkipped);
  if (sqnr && sqnr.rowsUsed < rows) notes.push(`SQNR on ${sqnr.rowsUsed}/${rows} rows`);
  return notes.join('; ');
}

export function formatReport(report: CheckpointReport): string {
  const { options } = report;
  const header = ['tensor', 'dtype', 'shape', 'size', 'scale exp (median)', 'saturated', 'flushed', 'SQNR dB', `SQNR H${options.hadamardBlock} dB`, 'NVFP4 dB', 'MXFP8 dB', 'outlier blocks', 'note'];
  const rows = report.tensors.map((tensor) => {
    const analysis = tensor.analysis;
    return [
      tensor.name,
      tensor.dtype,
      shapeText(tensor.shape),
      formatBytes(tensor.bytes),
      scaleRange(tensor),
      formatPercent(analysis?.saturatedFrac ?? null),
      formatPercent(analysis?.flushedFrac ?? null),
      formatDb(analysis?.sqnr?.noRotationDb ?? null),
      formatDb(analysis?.sqnr?.hadamardDb ?? null),
      formatDb(analysis?.sqnr?.formats?.nvfp4.db ?? null),
      formatDb(analysis?.sqnr?.formats?.mxfp8.db ?? null),
      analysis ? `${analysis.outlierBlocks}/${analysis.blocks}` : '-',
      note(tensor),
    ];
  });
  const analysed = report.tensors.filter((tensor) => tensor.analysis).length;
  const shards = report.shards.length > 1 ? `, ${report.shards.length} shards` : '';
  return [
    `${report.path}: ${report.tensors.length} tensors, ${formatBytes(report.dataBytes)} of tensor data${shards}`,
    `MXFP4 (E2M1, 32-element blocks, E8M0 scales); ${options.mode === 'histogram' ? 'histogram-only pass' : `deterministic Hadamard block ${options.hadamardBlock}; beside it NVFP4 (E2M1, 16-element blocks, E4M3 + FP32 scales) and MXFP8 (E4M3, 32-element blocks) on the same rows, unrotated`}; outlier block: scale ≥ median + ${options.outlierBinades} binades`,
    '',
    renderTable(header, rows, new Set([3, 5, 6, 7, 8, 9, 10, 11])),
    '',
    `${analysed} weight matrices analysed in ${report.seconds.toFixed(2)} s`,
  ].join('\n');
}

function oneSided(title: string, tensors: TensorSummary[]): string[] {
  if (tensors.length === 0) return [];
  return ['', `${title} (${tensors.length}):`, ...tensors.map((tensor) => `  ${tensor.name}  ${tensor.dtype} ${shapeText(tensor.shape)}  ${formatBytes(tensor.bytes)}`)];
}

export function formatComparison(comparison: CheckpointComparison): string {
  const header = ['tensor', 'shape', 'size', 'rel. change', 'scale shift', 'scale EMD', 'note'];
  const rows = comparison.matched.map((diff) => [
    diff.name,
    shapeText(diff.a.shape),
    formatBytes(Math.max(diff.a.bytes, diff.b.bytes)),
    diff.relativeChange === null ? '-' : diff.relativeChange.toExponential(3),
    formatSigned(diff.scaleShift?.meanShift ?? null, 3),
    diff.scaleShift ? diff.scaleShift.emd.toFixed(3) : '-',
    diff.note ?? '',
  ]);
  return [
    `A: ${comparison.a}`,
    `B: ${comparison.b}`,
    `${comparison.matched.length} tensors in both, ${comparison.onlyInA.length} only in A, ${comparison.onlyInB.length} only in B`,
    'rel. change = ‖A−B‖/‖A‖; scale shift = mean block-scale exponent B − A (binades); scale EMD = earth mover\'s distance between the scale histograms (binades)',
    '',
    renderTable(header, rows, new Set([2, 3, 4, 5])),
    ...oneSided('Only in A', comparison.onlyInA),
    ...oneSided('Only in B', comparison.onlyInB),
    '',
    `compared in ${comparison.seconds.toFixed(2)} s`,
  ].join('\n');
}

/** JSON with Infinity (a lossless SQNR) kept as the string "Infinity" instead of JSON's null. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, entry: unknown) => (entry === Infinity ? 'Infinity' : entry), 2);
}

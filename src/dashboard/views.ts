// Turns the run store's records into the dashboard's messages: run info, columnar loss slices, the
// per-layer overview and one layer's detail. Pure functions of a store run.
import { describeGemm, GEMM_KINDS, type GemmKind, type RunConfig } from '../protocol/config.js';
import { LAYER_METRIC_SPECS } from '../protocol/layer-metrics.js';
import { GEMM_OPERANDS, type ScaleHistogram, type StepRecord, type ValidationRecord } from '../protocol/telemetry.js';
import type { LayerDetailMessage, LossSeries, OverviewUpdate, RequestLayerMessage, RunInfo } from '../protocol/webview.js';
import type { LayerStatsHeadline } from '../store/headline-table.js';
import type { RunView } from '../store/run-store.js';
import { autocorrelation, lagCosines } from './correlation.js';
import { withGemmNotes } from '../shared/gemm-notes.js';

/** Lags (in stats samples) the autocorrelation curve covers at most. */
export const MAX_AUTOCORR_LAG = 32;

const NO_GEMMS: Record<GemmKind, string> = { fprop: '?', dgrad: '?', wgrad: '?' };

export function runInfo(run: RunView, divergedAt: number | null): RunInfo {
  const { summary } = run;
  const config = summary.config;
  const latest = (kind: GemmKind) => run.layers.map((_, index) => run.latestHeadline(index, kind));
  const gemms = config ? (Object.fromEntries(GEMM_KINDS.map((kind) => [kind, withGemmNotes(describeGemm(config.gemms[kind]), run.layers, kind, latest(kind))])) as Record<GemmKind, string>) : NO_GEMMS;
  const cost = run.telemetryCost();
  return {
    runId: summary.runId,
    name: summary.name,
    status: shownStatus(summary),
    startedAt: summary.startedAt ?? '',
    gemms,
    tokensPerStep: config?.tokensPerStep ?? 0,
    statsEvery: config?.statsEvery ?? 1,
    ...(config?.statsLayerGroups !== undefined ? { statsLayerGroups: config.statsLayerGroups } : {}),
    ...(config?.wgradErrorScope !== undefined ? { wgradErrorScope: config.wgradErrorScope } : {}),
    ...(config?.wgradErrorRowStride !== undefined ? { wgradErrorRowStride: config.wgradErrorRowStride } : {}),
    ...(config?.wgradErrorLag1 !== undefined ? { wgradErrorLag1: config.wgradErrorLag1 } : {}),
    layers: run.layers.map((layer) => layer.name),
    divergedAt: shownDivergedAt(summary, divergedAt),
    sketchSize: config?.sketchSize ?? 0,
    ...(config ? { seed: config.seed, steps: config.steps, seedGroup: seedGroupOf(config) } : {}),
    ...(cost ? { telemetryCost: cost.overhead } : {}),
  };
}

/**
 * What decides whether a run's info is sent again: runInfo's fields that change during a run, without
 * its GEMM notes and layer names, whose scans of every layer took ~150 ms a delta on a run of 30,000
 * layers; the telemetry cost to a tenth of a per cent (it moves a little with every stats step).
 */
export function runInfoKey(run: RunView, divergedAt: number | null): string {
  const { summary } = run;
  return `${shownStatus(summary)}|${shownDivergedAt(summary, divergedAt)}|${summary.name}|${run.layers.length}|${run.telemetryCost()?.overhead.toFixed(3)}`;
}

/** The store's `unknown` (no runStarted seen) did not end as reported either. */
function shownStatus(summary: RunView['summary']): RunInfo['status'] {
  return summary.status === 'unknown' ? 'interrupted' : summary.status;
}

function shownDivergedAt(summary: RunView['summary'], divergedAt: number | null): number | null {
  return divergedAt ?? (summary.ended?.status === 'diverged' ? summary.ended.step : null);
}

/** A hash of the config without its seed: runs that differ only in seed share it. */
export function seedGroupOf(config: RunConfig): string {
  const { seed: _seed, ...rest } = config;
  const text = stableJson(rest);
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619);
  return (hash >>> 0).toString(16);
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${stableJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Index of the first record with step > `after` in a step-ascending array. */
function firstAfter(records: readonly { step: number }[], after: number): number {
  let lo = 0;
  let hi = records.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (records[mid]!.step > after) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The loss points with step > `after` (all of them for after = −1). */
export function lossSlice(runId: string, records: readonly (StepRecord | ValidationRecord)[], after: number): LossSeries {
  const from = firstAfter(records, after);
  const n = records.length - from;
  const series: LossSeries = { runId, step: new Array(n), tokens: new Array(n), loss: new Array(n) };
  // Training steps also carry the gradient norm and learning rate (validation points do not).
  const training = n > 0 && records[from]!.type === 'step';
  const gradNorm: (number | null)[] = training ? new Array(n) : [];
  const lr: number[] = training ? new Array(n) : [];
  for (let i = 0; i < n; i++) {
    const record = records[from + i]!;
    series.step[i] = record.step;
    series.tokens[i] = record.tokens;
    series.loss[i] = record.loss;
    if (training && record.type === 'step') {
      gradNorm[i] = record.gradNorm;
      lr[i] = record.lr;
    }
  }
  if (training) {
    series.gradNorm = gradNorm;
    series.lr = lr;
  }
  return series;
}

/**
 * The layer overview's rows (each layer's newest metrics, in LAYER_METRIC_SPECS order) that changed
 * since `seen`, which is advanced in place: per layer (RunInfo.layers order) its stats version, the
 * sum over its GEMMs of (newest stats step + 1), which grows with every record; -1 for a row not
 * sent yet. Every row when none was sent (a snapshot, or a run new to the webview); null when none
 * changed. Only changed rows are computed and sent: a mixture-of-experts run has thousands of
 * layers, and most steps touch few of them. The metrics read the store's headlines (its table of
 * every layer's newest figures, by layer index), not decoded records: a stats step moves every row,
 * and decoding 90,000 records for it took ~1 s at 30,000 layers. The values go straight into the
 * columns the message carries.
 */
export function layerOverviewSince(run: RunView, seen: Float64Array): OverviewUpdate | null {
  const { layers } = run;
  const width = LAYER_METRIC_SPECS.length;
  const values = new Float64Array(layers.length * width);
  const rows = new Uint32Array(layers.length);
  let sent = 0;
  let step = -1;
  // One headline list reused for every layer: a stats step takes it 30,000 times.
  const latest: { records: LayerStatsHeadline[]; wgrad: LayerStatsHeadline | undefined } = { records: [], wgrad: undefined };
  for (let index = 0; index < layers.length; index++) {
    latest.records.length = 0;
    latest.wgrad = undefined;
    let version = 0;
    for (const gemm of GEMM_KINDS) {
      const headline = run.latestHeadline(index, gemm);
      if (!headline) continue;
      const latestStep = headline.step;
      version += latestStep + 1;
      if (latestStep > step) step = latestStep;
      if (gemm === 'wgrad') latest.wgrad = headline;
      latest.records.push(headline);
    }
    if (seen[index] === version) continue;
    seen[index] = version;
    for (let m = 0; m < width; m++) values[sent * width + m] = onTheWire(LAYER_METRIC_SPECS[m]!.of(latest));
    rows[sent++] = index;
  }
  if (sent === 0) return null;
  const runId = run.summary.runId;
  if (sent === layers.length) return { runId, step, layers: layers.length, values };
  return { runId, step, layers: layers.length, rows: rows.slice(0, sent), values: values.slice(0, sent * width) };
}

/**
 * A metric's value as the columns carry it: null as NaN; what JSON made of the LayerRows the
 * overview was sent as before, so the page shows what it showed: a non-finite value null, -0 as 0.
 */
function onTheWire(value: number | null): number {
  return value === null || !Number.isFinite(value) ? NaN : value + 0;
}

/** Everything the scale and correlation views show for one (layer, GEMM, operand). */
export function layerDetail(run: RunView, request: RequestLayerMessage): LayerDetailMessage {
  const records = run.layerStats(request.layer, request.gemm);
  const operandIndex = GEMM_OPERANDS[request.gemm].indexOf(request.operand);
  // One axis per detail: the newest record's scale code (a run keeps its GEMM formats); records
  // of another kind, if a publisher mixed them, are left out of the histogram rows.
  const scaleKind = records.at(-1)?.operands[operandIndex]?.histogram.kind ?? 'e8m0';
  const sameKind = (histogram: ScaleHistogram) => (histogram.kind ?? 'e8m0') === scaleKind;
  let minExp = Infinity;
  let maxExp = -Infinity;
  for (const record of records) {
    const histogram = record.operands[operandIndex]?.histogram;
    if (!histogram || histogram.counts.length === 0 || !sameKind(histogram)) continue;
    minExp = Math.min(minExp, histogram.minExp);
    maxExp = Math.max(maxExp, histogram.minExp + histogram.counts.length - 1);
  }
  const exponents = Number.isFinite(minExp) ? maxExp - minExp + 1 : 0;
  if (!Number.isFinite(minExp)) minExp = 0;
  const n = records.length;
  const counts = new Array<number>(n * exponents).fill(0);
  const detail: LayerDetailMessage = {
    type: 'layerDetail',
    requestId: request.requestId,
    runId: run.summary.runId,
    layer: request.layer,
    gemm: request.gemm,
    operand: request.operand,
    steps: records.map((record) => record.step),
    ...(scaleKind === 'e4m3' ? { scaleKind } : {}),
    minExp,
    exponents,
    counts,
    nanBlocks: [],
    saturatedFrac: [],
    flushedFrac: [],
    sqnrDb: [],
    lag1Cos: [],
    lagCos: [],
    lag: request.lag,
    autocorr: [],
  };
  const sketches: number[][] = [];
  records.forEach((record, i) => {
    const stats = record.operands[operandIndex];
    if (stats && sameKind(stats.histogram)) {
      const { histogram } = stats;
      const offset = i * exponents + histogram.minExp - minExp;
      for (let e = 0; e < histogram.counts.length; e++) counts[offset + e] = histogram.counts[e]!;
    }
    detail.nanBlocks.push(stats?.histogram.nanBlocks ?? 0);
    detail.saturatedFrac.push(stats?.saturatedFrac ?? 0);
    detail.flushedFrac.push(stats?.flushedFrac ?? 0);
    detail.sqnrDb.push(stats?.sqnrDb ?? null);
    if (record.wgradError) {
      detail.lag1Cos.push(record.wgradError.lag1Cos);
      sketches.push(record.wgradError.sketch);
    }
  });
  if (sketches.length === n && n > 0) {
    detail.lagCos = lagCosines(sketches, request.lag);
    detail.autocorr = autocorrelation(sketches, Math.min(MAX_AUTOCORR_LAG, n - 1));
  } else detail.lag1Cos = [];
  return detail;
}

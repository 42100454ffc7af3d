// Messages between the extension host and the dashboard webview. One discriminated union per
// direction; both sides validate what they receive. Series travel columnar (parallel arrays) so a
// 10,000-step run is a few arrays, not 10,000 objects.
import { GEMM_KINDS, WGRAD_ERROR_SCOPES, type GemmKind, type WgradErrorScope } from './config.js';
import { OPERANDS, RUN_STATUSES, SCALE_KINDS, type Operand, type RunStatus, type ScaleKind } from './telemetry.js';
import { GRID_METRICS, LAYER_METRICS, type GridMetric } from './layer-metrics.js';
import { arrayOf, bool, float64Array, int, intIn, literal, nonNegInt, nullable, num, object, optional, refined, str, uint32Array, union, ValidationError, type Schema } from './validate.js';

/** What the dashboard needs to know about a run besides its series. */
export interface RunInfo {
  runId: string;
  name: string;
  status: RunStatus;
  startedAt: string;
  /** Short labels per GEMM, e.g. { fprop: "mxfp4", wgrad: "mxfp4 · H16" }. */
  gemms: Record<GemmKind, string>;
  tokensPerStep: number;
  statsEvery: number;
  /** The run config's opt-in statsLayerGroups (absent: 1, every layer at every stats step). */
  statsLayerGroups?: number;
  /** The run config's opt-in wgradErrorScope (absent: 'batch', the error of the ranks' mean gradient). */
  wgradErrorScope?: WgradErrorScope;
  /** The run config's opt-in wgradErrorRowStride (absent: 1, the Wgrad error from every row, exact). */
  wgradErrorRowStride?: number;
  /** The run config's opt-in wgradErrorLag1 (absent: true; false: its publisher kept no E_{t−1}, no lag-1 cosine). */
  wgradErrorLag1?: boolean;
  /** Layer names in model order. */
  layers: string[];
  /** The step whose loss diverged (non-finite or run ended `diverged`), if any. */
  divergedAt: number | null;
  /** Entries of each Wgrad error sketch (0: none); sets the correlation plots' noise floor. */
  sketchSize?: number;
  seed?: number;
  /** Planned steps (0: open-ended). */
  steps?: number;
  /** Equal for runs whose configs differ only in seed (a hash of the rest); such runs form a seed group. */
  seedGroup?: string;
  /** What telemetry costs the run's recent steps against its steps without (0.08: 8 % longer); absent until it has both (store/step-cost.ts). */
  telemetryCost?: number;
}

/**
 * A run's info on the wire: `layers` only where the page does not have them yet (a run's layers are
 * fixed by its runStarted, and a new one forces a snapshot). The info is sent again whenever its
 * telemetry cost moves, with every stats step: 30,000 names were 1.1 MB of each of those deltas.
 */
export type RunInfoUpdate = Omit<RunInfo, 'layers'> & { layers?: string[] };

/** A loss curve, columnar; `loss[i]` is null where the loss was non-finite. */
export interface LossSeries {
  runId: string;
  step: number[];
  tokens: number[];
  loss: (number | null)[];
  /** Training series only: the global gradient norm before clipping (null: non-finite) and the learning rate, per step. */
  gradNorm?: (number | null)[];
  lr?: number[];
}

// The per-layer metrics are defined once, in layer-metrics.ts: the overview's columns (a LayerRow carries
// them in that order) and the metrics the layer × step heatmap draws (any stats step, not just the newest).
export { GRID_METRICS, LAYER_METRICS, type GridMetric, type LayerMetric } from './layer-metrics.js';

/** One row of the layer overview: the layer's latest stats-step metrics (null where unknown). */
export interface LayerRow {
  layer: string;
  values: (number | null)[];
}

/** A run's layer overview as the page keeps it: `rows[i].values` follow LAYER_METRIC_SPECS order, rows in RunInfo.layers order. */
export interface LayerOverview {
  runId: string;
  /** The stats step the rows describe (latest seen); -1 before any stats. */
  step: number;
  rows: LayerRow[];
}

/**
 * A run's layer overview rows on the wire: values only, columnar, in a Float64Array (which
 * webview.postMessage passes as bytes beside its JSON), the layer names being the run info's. A
 * stats step of a 30,000-layer run moves every row: as LayerRow objects that was ~4.6 MB of JSON.
 */
export interface OverviewUpdate {
  runId: string;
  /** The stats step the rows describe (latest seen); -1 before any stats. */
  step: number;
  /** The run's layer count (RunInfo.layers.length), which the rows index. */
  layers: number;
  /** Indices in RunInfo.layers of the rows sent, ascending; absent: every layer, in order. */
  rows?: Uint32Array;
  /** values[i * LAYER_METRICS.length + m]: row i's metric m; NaN where it is null. */
  values: Float64Array;
}

export const ALERT_KINDS = ['nan-scales', 'loss-spike', 'grad-to-err', 'divergence'] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

export interface Alert {
  runId: string;
  kind: AlertKind;
  step: number;
  /** The first layer whose metric moved (for loss events: left its running range before it); null when none did. */
  layer: string | null;
  /** That layer's GEMM, when known. */
  gemm?: GemmKind;
  /** The metric that moved, when it is one the layer heatmap draws. */
  metric?: GridMetric;
  message: string;
  /** Divergence: the checkpoint the trainer kept from before the event (its path on the trainer's machine). */
  checkpoint?: string;
}

/** Where "Show in Dashboard" opens for an alert: its run alone, at its step, layer, GEMM and metric. */
export function alertFocus(alert: Alert): FocusMessage {
  return { type: 'focus', mode: 'single', runIds: [alert.runId], at: { step: alert.step, layer: alert.layer, ...(alert.gemm ? { gemm: alert.gemm } : {}), ...(alert.metric ? { metric: alert.metric } : {}) } };
}

/** Everything the dashboard shows before a layer is picked. */
export interface SnapshotMessage {
  type: 'snapshot';
  runs: RunInfoUpdate[];
  loss: LossSeries[];
  validation: LossSeries[];
  overview: OverviewUpdate[];
  alerts: Alert[];
}

/**
 * New data since the last snapshot/delta: series slices are appended, runs replace, and an
 * overview's rows replace the rows of the same layers (a run's first overview holds every layer).
 */
export interface DeltaMessage {
  type: 'delta';
  runs: RunInfoUpdate[];
  loss: LossSeries[];
  validation: LossSeries[];
  overview: OverviewUpdate[];
  alerts: Alert[];
}

/** Per-stats-step data of one (run, layer, GEMM, operand), the answer to `requestLayer`. */
export interface LayerDetailMessage {
  type: 'layerDetail';
  requestId: number;
  runId: string;
  layer: string;
  gemm: GemmKind;
  operand: Operand;
  steps: number[];
  /** Scale code of the histograms: E8M0 exponents (default) or NVFP4's E4M3 codes (then minExp is a code). */
  scaleKind?: ScaleKind;
  /** Exponent (or E4M3 code) of row 0 of `counts`; rows cover minExp .. minExp + exponents − 1. */
  minExp: number;
  exponents: number;
  /** counts[i * exponents + e]: blocks at steps[i] with exponent minExp + e. */
  counts: number[];
  nanBlocks: number[];
  saturatedFrac: number[];
  flushedFrac: number[];
  sqnrDb: (number | null)[];
  /** Wgrad error correlation (empty arrays when the GEMM is not wgrad or has no error stats). */
  lag1Cos: (number | null)[];
  /** cos(E_t, E_{t−k}) from the sketches, k = `lag` stats steps, at `steps[i]`. */
  lagCos: (number | null)[];
  lag: number;
  /** Mean cos(E_t, E_{t−j}) over the run, j = 0..autocorr.length−1 stats steps. */
  autocorr: (number | null)[];
}

/** One metric for every layer × stats step of a run and GEMM, the answer to `requestLayerGrid`. */
export interface LayerGridMessage {
  type: 'layerGrid';
  requestId: number;
  runId: string;
  metric: GridMetric;
  gemm: GemmKind;
  /** Rows, in model order: the layers with at least one record of this GEMM in the run. */
  layers: string[];
  /**
   * The run's other layers, which have no record of this GEMM at all and are left out of the rows:
   * a frozen weight (LoRA's base layers) has no Wgrad, a first layer reading data no Dgrad.
   */
  withoutStats: string[];
  /** Columns, ascending. */
  steps: number[];
  /** values[row * steps.length + column]; null where the layer has no stats at that step. */
  values: (number | null)[];
}

/** The host asks the dashboard to show something (e.g. the Compare Runs command). */
export interface FocusMessage {
  type: 'focus';
  mode: 'single' | 'compare';
  runIds: string[];
  /** Show this step (e.g. a divergence), and the layer (and GEMM) that moved first when known. */
  at?: FocusAt;
}

export interface FocusAt {
  step: number;
  layer: string | null;
  gemm?: GemmKind;
  metric?: GridMetric;
}

export type HostToWebview = SnapshotMessage | DeltaMessage | LayerDetailMessage | LayerGridMessage | FocusMessage;

/** The webview is loaded and wants a snapshot. */
export interface ReadyMessage {
  type: 'ready';
}

export interface RequestLayerMessage {
  type: 'requestLayer';
  requestId: number;
  runId: string;
  layer: string;
  gemm: GemmKind;
  operand: Operand;
  /** Lag k (in stats steps) for the lag-k correlation curve. */
  lag: number;
}

export interface RequestLayerGridMessage {
  type: 'requestLayerGrid';
  requestId: number;
  runId: string;
  metric: GridMetric;
  gemm: GemmKind;
}

/** Save the current chart's data (CSV text) or image (PNG data URL) through a save dialog. */
export interface ExportMessage {
  type: 'export';
  format: 'csv' | 'png';
  fileName: string;
  data: string;
}

/** The sidebar's "open" button, or a sidebar alert (then `focus` says where the dashboard opens). */
export interface OpenDashboardMessage {
  type: 'openDashboard';
  focus?: FocusMessage;
}

export type WebviewToHost = ReadyMessage | RequestLayerMessage | RequestLayerGridMessage | ExportMessage | OpenDashboardMessage;

// ---------------------------------------------------------------- validation

/**
 * What the webview accepts. The host keeps its own bounds at or under these (RunStore clamps its
 * limits to them, AlertTracker keeps `alerts` alerts), so no record it accepted can make a snapshot
 * the webview refuses.
 */
export const WEBVIEW_LIMITS = { runs: 1000, seriesPoints: 10_000_000, alerts: 1000, alertMessage: 4096 } as const;

const runId = str(256);
/** Layers of a run the page takes (protocol 1.7 lets a client show 58 blocks of 256 experts, ~30,000). */
const MAX_LAYERS = 100_000;
const layerName = str(512);
const nullableNums = arrayOf(nullable(num), WEBVIEW_LIMITS.seriesPoints);
const nums = arrayOf(num, WEBVIEW_LIMITS.seriesPoints);
const gemmLabels = object<Record<GemmKind, string>>({ fprop: str(128), dgrad: str(128), wgrad: str(128) });

const runInfoSchema = object<RunInfoUpdate>({
  runId,
  name: str(512),
  status: literal(...RUN_STATUSES),
  startedAt: str(64),
  gemms: gemmLabels,
  tokensPerStep: nonNegInt,
  statsEvery: intIn(1, 1_000_000),
  statsLayerGroups: optional(intIn(1, 1024)),
  wgradErrorScope: optional(literal(...WGRAD_ERROR_SCOPES)),
  wgradErrorRowStride: optional(intIn(1, 1024)),
  wgradErrorLag1: optional(bool),
  layers: optional(arrayOf(layerName, MAX_LAYERS)),
  divergedAt: nullable(nonNegInt),
  sketchSize: optional(nonNegInt),
  seed: optional(int),
  steps: optional(nonNegInt),
  seedGroup: optional(str(64)),
  telemetryCost: optional(num),
});

const lossSeriesSchema = object<LossSeries>({ runId, step: nums, tokens: nums, loss: nullableNums, gradNorm: optional(nullableNums), lr: optional(nums) });
const overviewUpdateSchema = refined(
  object<OverviewUpdate>({
    runId,
    step: intIn(-1, Number.MAX_SAFE_INTEGER),
    layers: intIn(0, MAX_LAYERS),
    rows: optional(uint32Array(MAX_LAYERS)),
    values: float64Array(MAX_LAYERS * LAYER_METRICS.length),
  }),
  (update, path) => {
    const { rows, layers, values } = update;
    const count = rows ? rows.length : layers;
    if (values.length !== count * LAYER_METRICS.length) throw new ValidationError(`${path}.values`, `${count * LAYER_METRICS.length} values (${count} rows × ${LAYER_METRICS.length} metrics)`, values.length);
    if (!rows) return;
    for (let i = 0; i < rows.length; i++) {
      if (rows[i]! >= layers || (i > 0 && rows[i]! <= rows[i - 1]!)) throw new ValidationError(`${path}.rows[${i}]`, `an index below ${layers} (the run's layer count) above the one before`, rows[i]);
    }
  },
);
const alertSchema = object<Alert>({ runId, kind: literal(...ALERT_KINDS), step: nonNegInt, layer: nullable(layerName), gemm: optional(literal(...GEMM_KINDS)), metric: optional(literal(...GRID_METRICS)), message: str(WEBVIEW_LIMITS.alertMessage), checkpoint: optional(str(4096)) });

const dataFields = {
  runs: arrayOf(runInfoSchema, WEBVIEW_LIMITS.runs),
  loss: arrayOf(lossSeriesSchema, WEBVIEW_LIMITS.runs),
  validation: arrayOf(lossSeriesSchema, WEBVIEW_LIMITS.runs),
  overview: arrayOf(overviewUpdateSchema, WEBVIEW_LIMITS.runs),
  alerts: arrayOf(alertSchema, WEBVIEW_LIMITS.alerts),
};

const focusSchema = object<FocusMessage>({
  type: literal('focus'),
  mode: literal('single', 'compare'),
  runIds: arrayOf(runId, 16),
  at: optional(object<FocusAt>({ step: nonNegInt, layer: nullable(layerName), gemm: optional(literal(...GEMM_KINDS)), metric: optional(literal(...GRID_METRICS)) })),
});

export const hostToWebviewSchema: Schema<HostToWebview> = union<HostToWebview>({
  snapshot: object<SnapshotMessage>({ type: literal('snapshot'), ...dataFields }),
  delta: object<DeltaMessage>({ type: literal('delta'), ...dataFields }),
  layerDetail: object<LayerDetailMessage>({
    type: literal('layerDetail'),
    requestId: nonNegInt,
    runId,
    layer: layerName,
    gemm: literal(...GEMM_KINDS),
    operand: literal(...OPERANDS),
    steps: nums,
    scaleKind: optional(literal(...SCALE_KINDS)),
    minExp: intIn(-127, 127),
    exponents: intIn(0, 256),
    counts: nums,
    nanBlocks: nums,
    saturatedFrac: nums,
    flushedFrac: nums,
    sqnrDb: nullableNums,
    lag1Cos: nullableNums,
    lagCos: nullableNums,
    lag: intIn(1, 100_000),
    autocorr: nullableNums,
  }),
  layerGrid: object<LayerGridMessage>({
    type: literal('layerGrid'),
    requestId: nonNegInt,
    runId,
    metric: literal(...GRID_METRICS),
    gemm: literal(...GEMM_KINDS),
    layers: arrayOf(layerName, 100_000),
    withoutStats: arrayOf(layerName, 100_000),
    steps: nums,
    values: nullableNums,
  }),
  focus: focusSchema,
});

export const webviewToHostSchema: Schema<WebviewToHost> = union<WebviewToHost>({
  ready: object<ReadyMessage>({ type: literal('ready') }),
  requestLayer: object<RequestLayerMessage>({
    type: literal('requestLayer'),
    requestId: nonNegInt,
    runId,
    layer: layerName,
    gemm: literal(...GEMM_KINDS),
    operand: literal(...OPERANDS),
    lag: intIn(1, 100_000),
  }),
  requestLayerGrid: object<RequestLayerGridMessage>({ type: literal('requestLayerGrid'), requestId: nonNegInt, runId, metric: literal(...GRID_METRICS), gemm: literal(...GEMM_KINDS) }),
  export: object<ExportMessage>({
    type: literal('export'),
    format: literal('csv', 'png'),
    fileName: str(256),
    data: str(64 * 1024 * 1024),
  }),
  openDashboard: object<OpenDashboardMessage>({ type: literal('openDashboard'), focus: optional(focusSchema) }),
});

/** A delta with nothing in it is not worth a postMessage. */
export function isEmptyDelta(delta: DeltaMessage): boolean {
  return delta.runs.length + delta.loss.length + delta.validation.length + delta.overview.length + delta.alerts.length === 0;
}

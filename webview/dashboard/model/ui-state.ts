// The dashboard's UI state: what is selected and how charts are drawn. Persisted with the webview's
// setState, so it is restored field by field from whatever was saved (an older version's state or
// garbage keeps the defaults for what does not fit).
import { GEMM_KINDS, type GemmKind } from '../../../src/protocol/config.js';
import { GEMM_OPERANDS, type Operand } from '../../../src/protocol/telemetry.js';
import { layerMetric } from '../../../src/protocol/layer-metrics.js';
import { GRID_METRICS, LAYER_METRICS, type GridMetric, type LayerMetric, type LayerRow } from '../../../src/protocol/webview.js';

export const TABS = ['loss', 'overhead', 'scales', 'overview', 'layers', 'correlation', 'alerts', 'runs'] as const;
export type Tab = (typeof TABS)[number];

export const MAX_EMA = 0.99;

export interface UiState {
  tab: Tab;
  mode: 'single' | 'compare';
  /** Runs shown (single: the focused run first; compare: the runs side by side). Empty = newest. */
  runIds: string[];
  baselineRunId: string | null;
  xAxis: 'step' | 'tokens';
  /** EMA weight in [0, MAX_EMA] (the slider's range, so its label and its position agree). */
  ema: number;
  logScale: boolean;
  relative: boolean;
  targetLoss: number | null;
  layerFilter: string;
  layer: string | null;
  gemm: GemmKind;
  operand: Operand;
  /** Stats step of the histogram; null follows the newest. */
  step: number | null;
  overlayRunId: string | null;
  lag: number;
  overviewMetric: LayerMetric;
  /** The Layer overview shows a row per group of experts (a mixture-of-experts run), not one per expert. */
  groupExperts: boolean;
  /** The layer × step heatmap's metric and GEMM. */
  gridMetric: GridMetric;
  gridGemm: GemmKind;
  /** Loss chart x range (in xAxis units); null shows everything. */
  zoom: { min: number; max: number } | null;
  /** Loss chart y range set by shift+wheel; null: automatic. */
  yZoom: { min: number; max: number } | null;
  /** Automatic y range ignores outliers (a spike runs off the top instead of squashing the rest). */
  robustY: boolean;
  /** Seed groups (RunInfo.seedGroup) drawn as their separate runs instead of mean ± sd. */
  ungroupedSeeds: string[];
  /** The runs table's sort column (index) and direction. */
  runsSort: { column: number; descending: boolean };
  /** Palette slot per run: a run keeps its colour while it is held, across reloads. */
  colors: Record<string, number>;
}

export const DEFAULT_UI_STATE: UiState = {
  tab: 'loss',
  mode: 'single',
  runIds: [],
  baselineRunId: null,
  xAxis: 'step',
  ema: 0.6,
  logScale: false,
  relative: false,
  targetLoss: null,
  layerFilter: '',
  layer: null,
  gemm: 'wgrad',
  operand: 'dy',
  step: null,
  overlayRunId: null,
  lag: 4,
  overviewMetric: 'wgradRelErr',
  groupExperts: true,
  gridMetric: 'wgradRelErr',
  gridGemm: 'wgrad',
  zoom: null,
  yZoom: null,
  robustY: true,
  ungroupedSeeds: [],
  runsSort: { column: 0, descending: false },
  colors: {},
};

const oneOf = <T>(allowed: readonly T[], value: unknown, fallback: T): T => (allowed.includes(value as T) ? (value as T) : fallback);
const stringOrNull = (value: unknown, fallback: string | null): string | null => (typeof value === 'string' || value === null ? value : fallback);
const finite = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

export function restoreUiState(saved: unknown): UiState {
  const d = DEFAULT_UI_STATE;
  if (typeof saved !== 'object' || saved === null) return { ...d };
  const s = saved as Record<string, unknown>;
  const gemm = oneOf(GEMM_KINDS, s.gemm, d.gemm);
  return {
    tab: oneOf(TABS, s.tab, d.tab),
    mode: oneOf(['single', 'compare'] as const, s.mode, d.mode),
    runIds: Array.isArray(s.runIds) ? s.runIds.filter((id): id is string => typeof id === 'string').slice(0, 16) : d.runIds,
    baselineRunId: stringOrNull(s.baselineRunId, d.baselineRunId),
    xAxis: oneOf(['step', 'tokens'] as const, s.xAxis, d.xAxis),
    ema: finite(s.ema) ? Math.min(MAX_EMA, Math.max(0, s.ema)) : d.ema,
    logScale: typeof s.logScale === 'boolean' ? s.logScale : d.logScale,
    relative: typeof s.relative === 'boolean' ? s.relative : d.relative,
    targetLoss: finite(s.targetLoss) ? s.targetLoss : d.targetLoss,
    layerFilter: typeof s.layerFilter === 'string' ? s.layerFilter.slice(0, 256) : d.layerFilter,
    layer: stringOrNull(s.layer, d.layer),
    gemm,
    operand: oneOf(GEMM_OPERANDS[gemm], s.operand, GEMM_OPERANDS[gemm][0]),
    step: finite(s.step) ? s.step : null,
    overlayRunId: stringOrNull(s.overlayRunId, d.overlayRunId),
    lag: finite(s.lag) && Number.isInteger(s.lag) && s.lag >= 1 ? Math.min(s.lag, 1000) : d.lag,
    overviewMetric: oneOf(LAYER_METRICS, s.overviewMetric, d.overviewMetric),
    groupExperts: typeof s.groupExperts === 'boolean' ? s.groupExperts : d.groupExperts,
    gridMetric: oneOf(GRID_METRICS, s.gridMetric, d.gridMetric),
    gridGemm: oneOf(GEMM_KINDS, s.gridGemm, d.gridGemm),
    zoom: restoreZoom(s.zoom),
    yZoom: restoreZoom(s.yZoom),
    robustY: typeof s.robustY === 'boolean' ? s.robustY : d.robustY,
    ungroupedSeeds: Array.isArray(s.ungroupedSeeds) ? s.ungroupedSeeds.filter((key): key is string => typeof key === 'string').slice(0, 64) : d.ungroupedSeeds,
    runsSort: restoreSort(s.runsSort),
    colors: restoreColors(s.colors),
  };
}

function restoreSort(saved: unknown): UiState['runsSort'] {
  const sort = saved as { column?: unknown; descending?: unknown } | null;
  return sort && Number.isInteger(sort.column) && (sort.column as number) >= 0 && (sort.column as number) < 16 ? { column: sort.column as number, descending: sort.descending === true } : { ...DEFAULT_UI_STATE.runsSort };
}

function restoreColors(saved: unknown): Record<string, number> {
  if (typeof saved !== 'object' || saved === null) return {};
  const entries = Object.entries(saved).filter(([, slot]) => Number.isInteger(slot) && (slot as number) >= 0);
  return Object.fromEntries(entries.slice(0, 1000)) as Record<string, number>;
}

/**
 * Colour slots for the runs held now: runs that had one keep it, new runs take the lowest free
 * slot, runs no longer held give theirs back.
 */
export function assignColorSlots(previous: Readonly<Record<string, number>>, runIds: readonly string[]): Record<string, number> {
  const slots: Record<string, number> = {};
  const taken = new Set<number>();
  for (const runId of runIds) {
    const slot = previous[runId];
    if (slot !== undefined && !taken.has(slot)) {
      slots[runId] = slot;
      taken.add(slot);
    }
  }
  let next = 0;
  for (const runId of runIds) {
    if (slots[runId] !== undefined) continue;
    while (taken.has(next)) next++;
    slots[runId] = next;
    taken.add(next);
  }
  return slots;
}

function restoreZoom(saved: unknown): UiState['zoom'] {
  const zoom = saved as { min?: unknown; max?: unknown } | null;
  return zoom && finite(zoom.min) && finite(zoom.max) && zoom.min < zoom.max ? { min: zoom.min, max: zoom.max } : null;
}

/** Zoom the x range by `factor` (< 1 zooms in) around `at`, kept inside [lo, hi]; null = all of it. */
export function zoomAround(current: { min: number; max: number }, at: number, factor: number, lo: number, hi: number): UiState['zoom'] {
  const min = Math.max(lo, at - (at - current.min) * factor);
  const max = Math.min(hi, at + (current.max - at) * factor);
  return max - min >= hi - lo || max <= min ? null : { min, max };
}

/**
 * Layers whose name matches `query`: a regular expression when it parses, else a case-insensitive
 * substring. At most `limit` names, so a 224-layer picker never builds hundreds of options at once.
 */
export function filterLayers(names: readonly string[], query: string, limit: number): { names: string[]; total: number } {
  let matches: (name: string) => boolean;
  try {
    const pattern = new RegExp(query, 'i');
    matches = (name) => pattern.test(name);
  } catch {
    const needle = query.toLowerCase();
    matches = (name) => name.toLowerCase().includes(needle);
  }
  const found = names.filter(matches);
  return { names: found.slice(0, limit), total: found.length };
}

/** Rows sorted worst first by one metric; rows without a value go last in model order. */
export function worstFirst(rows: readonly LayerRow[], metric: LayerMetric): LayerRow[] {
  const index = LAYER_METRICS.indexOf(metric);
  const sign = layerMetric(metric).worse === 'higher' ? -1 : 1;
  return rows
    .map((row, order) => ({ row, order }))
    .sort((a, b) => {
      const x = a.row.values[index] ?? null;
      const y = b.row.values[index] ?? null;
      if (x === null || y === null) return x === y ? a.order - b.order : x === null ? 1 : -1;
      return sign * (x - y) || a.order - b.order;
    })
    .map(({ row }) => row);
}

// The in-memory run store the extension reads: every run, live or loaded from a run log, with its
// step series, validation points and per-(layer, GEMM) layer-stats history. Plain Node (no
// vscode) so it is tested and benchmarked directly. Bounded: each series is a ThinningSeries, so
// a Llama-8B-sized run (224 layers × 3 GEMMs × 10,000 steps) fits the budget in docs/architecture.md.
import { GEMM_KINDS } from '../protocol/config.js';
import type {
  CheckpointSavedRecord,
  GemmKind,
  LayerInfo,
  LayerStatsRecord,
  RunConfig,
  RunEndedRecord,
  RunStatus,
  StepRecord,
  TelemetryRecord,
  ValidationRecord,
} from '../protocol/index.js';
import type { GridFields } from '../protocol/layer-metrics.js';
import { WEBVIEW_LIMITS } from '../protocol/webview.js';
import { HeadlineTable, type LayerStatsHeadline } from './headline-table.js';
import { LayerStatsSeries } from './layer-stats-series.js';
import { ThinningSeries } from './thinning-series.js';
import { RecentStepTimes, type TelemetryCost } from './step-cost.js';

export interface StoreLimits {
  /** Stats steps kept per (layer, GEMM); beyond it older ones thin out to every 2nd, 4th… */
  statsPerSeries: number;
  /** Step records kept per run, thinned the same way. */
  stepsPerRun: number;
  /** Validation points kept per run, thinned the same way. */
  validationPerRun: number;
  /** Runs kept; when over, the oldest run that is not live is dropped. */
  runs: number;
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { statsPerSeries: 64, stepsPerRun: 20_000, validationPerRun: 2_000, runs: 32 };

/**
 * The most any setting may ask for: what the dashboard webview accepts in one snapshot
 * (WEBVIEW_LIMITS: 1000 runs, 10M points per series; a layer detail is stats steps × ≤ 255 bins).
 */
export const MAX_STORE_LIMITS: StoreLimits = { statsPerSeries: 10_000, stepsPerRun: 1_000_000, validationPerRun: 1_000_000, runs: WEBVIEW_LIMITS.runs };

/**
 * Layers a run may declare and still keep `statsPerSeries` stats steps of each (layer, GEMM): a run
 * of more keeps proportionally fewer per series, at least 2 (the first and the newest, thinned
 * evenly between), so that a run's layer stats hold at most statsPerSeries × 3 × 341 rows (~1 KB
 * each: ~64 MiB at the default 64). A 224-layer model keeps all 64; four blocks of a 128-expert MoE
 * (1,043 layers, each expert a layer) keep 20; from ~11,000 layers, 2. Before, a run's memory grew
 * with its layer count (~200 MiB at 1,043 layers, allocated at its first stats step).
 */
export const LAYERS_AT_FULL_HISTORY = 341;

/** Rows each (layer, GEMM) series of a run declaring `layers` layers keeps (see LAYERS_AT_FULL_HISTORY). */
export function statsPerSeriesOf(statsPerSeries: number, layers: number): number {
  if (layers <= LAYERS_AT_FULL_HISTORY) return statsPerSeries;
  return Math.max(2, Math.floor((statsPerSeries * LAYERS_AT_FULL_HISTORY) / layers));
}

/** Where a run came from: streamed from a trainer, or read from a run-log directory. */
export type RunSource = 'live' | 'loaded';

export interface RunSummary {
  runId: string;
  name: string;
  source: RunSource;
  status: RunStatus;
  /** Undefined until the runStarted record arrives. */
  config: RunConfig | undefined;
  startedAt: string | undefined;
  /** -1 before the first step. */
  lastStep: number;
  lastTokens: number;
  /** Loss of the newest step (null when non-finite or no step yet). */
  lastLoss: number | null;
  /** Loss at the last step once the run ended; undefined while it runs. */
  finalLoss: number | null | undefined;
  ended: RunEndedRecord | undefined;
  /** Run-log directory for loaded runs. */
  dir: string | undefined;
  /** Where the trainer said it writes this run's log (runStarted.logDir), on its own machine. */
  logDir: string | undefined;
}

export type SeriesKey = `${string}/${GemmKind}`;

export function seriesKey(layer: string, gemm: GemmKind): SeriesKey {
  return `${layer}/${gemm}`;
}

/** Read access to one run. Arrays returned are the store's own: do not mutate them. */
export interface RunView {
  readonly summary: RunSummary;
  readonly layers: readonly LayerInfo[];
  steps(): readonly StepRecord[];
  validation(): readonly ValidationRecord[];
  checkpoints(): readonly CheckpointSavedRecord[];
  /** Every stats step seen (thinned like the series once over `stepsPerRun`). */
  statsSteps(): readonly number[];
  /** The kept history of one (layer, GEMM), oldest first, always ending with the newest (decoded on first read after a change). */
  layerStats(layer: string, gemm: GemmKind): readonly LayerStatsRecord[];
  /**
   * The history of `layers[layer]`'s `gemm` visited as fields read in place (LayerStatsSeries.forEachKept:
   * read them during the call), each with the one before it, decoding nothing; returns how many
   * there were. By index, as the heatmap reads every layer's at a time.
   */
  forEachLayerStat(layer: number, gemm: GemmKind, visit: (fields: GridFields, previous: GridFields | undefined) => void): number;
  /**
   * The headline of the newest record of `layers[layer]`'s `gemm`: what views of every layer read,
   * without decoding the record (a stats step's overview of 30,000 layers took ~1 s decoding them).
   * By index, from one table in layer order: views read every layer's at a time.
   */
  latestHeadline(layer: number, gemm: GemmKind): LayerStatsHeadline | undefined;
  /** The (layer, GEMM) pairs that have stats, in layer and GEMM order. */
  seriesKeys(): SeriesKey[];
  /** What telemetry costs the run's recent steps, against its steps without (step-cost.ts); undefined until there are both. */
  telemetryCost(): TelemetryCost | undefined;
  /** layerStats records stored so far: unchanged, no layer has new stats (views skip their scans of every layer). */
  readonly statsIngested: number;
}

export interface StoreChange {
  runId: string;
  /** The record just ingested; absent when the run was removed or reset. */
  record?: TelemetryRecord;
  removed?: boolean;
}

export interface Disposable {
  dispose(): void;
}

/** A layer runStarted declared: its index in the run's layers (its first, if named twice) and its series by GEMM. */
interface DeclaredLayer extends Record<GemmKind, LayerStatsSeries | undefined> {
  index: number;
}

const GEMM_INDEX: Record<GemmKind, number> = { fprop: GEMM_KINDS.indexOf('fprop'), dgrad: GEMM_KINDS.indexOf('dgrad'), wgrad: GEMM_KINDS.indexOf('wgrad') };

/** Where the headline of `layer`'s `gemm` lies in its run's table. */
function placeOf(layer: number, gemm: GemmKind): number {
  return layer * GEMM_KINDS.length + GEMM_INDEX[gemm];
}

class StoredRun implements RunView {
  readonly summary: RunSummary;
  layers: LayerInfo[] = [];
  statsIngested = 0;
  private readonly stepSeries: ThinningSeries<StepRecord>;
  private readonly validationSeries: ThinningSeries<ValidationRecord>;
  private readonly statsStepSeries: ThinningSeries<number>;
  /** Rows per (layer, GEMM) series: the limit, or fewer for a run of many layers (statsPerSeriesOf). */
  private statsPerSeries: number;
  private readonly saved: CheckpointSavedRecord[] = [];
  private readonly recentSteps = new RecentStepTimes();

  constructor(
    runId: string,
    source: RunSource,
    private readonly limits: StoreLimits,
    dir: string | undefined,
  ) {
    this.summary = { runId, name: runId, source, status: 'unknown', config: undefined, startedAt: undefined, lastStep: -1, lastTokens: 0, lastLoss: null, finalLoss: undefined, ended: undefined, dir, logDir: undefined };
    this.stepSeries = new ThinningSeries(limits.stepsPerRun);
    this.validationSeries = new ThinningSeries(limits.validationPerRun);
    this.statsStepSeries = new ThinningSeries(limits.stepsPerRun);
    this.statsPerSeries = limits.statsPerSeries;
  }

  /**
   * The series of each layer runStarted declared, by GEMM (layerStats for any other name are
   * refused, so series stay bounded): one lookup per record by the layer name as it came, where
   * a key made of layer and GEMM would be built and hashed afresh for every record.
   */
  private declared = new Map<string, DeclaredLayer>();
  /** Every declared (layer, GEMM)'s newest headline, at layer index × 3 + GEMM index (placeOf). */
  private headlines = new HeadlineTable(0);
  /** Every (layer, GEMM)'s series by place (placeOf), for views that read every layer's by index. */
  private seriesAt: (LayerStatsSeries | undefined)[] = [];
  /** Where runStarted named a layer twice: each index's first (the one its series use); else none. */
  private firstIndex: Int32Array | undefined;

  /** Returns why the record was refused, or undefined when it was stored. */
  ingest(record: TelemetryRecord): string | undefined {
    const summary = this.summary;
    switch (record.type) {
      case 'runStarted':
        summary.name = record.name;
        summary.config = record.config;
        summary.startedAt = record.startedAt;
        summary.logDir = record.logDir;
        summary.status = summary.ended ? summary.ended.status : 'running';
        this.layers = record.layers;
        this.statsPerSeries = statsPerSeriesOf(this.limits.statsPerSeries, record.layers.length);
        this.declared = new Map();
        this.seriesAt = [];
        this.firstIndex = undefined;
        record.layers.forEach((layer, index) => {
          const first = this.declared.get(layer.name);
          if (!first) this.declared.set(layer.name, { index, fprop: undefined, dgrad: undefined, wgrad: undefined });
          else (this.firstIndex ??= Int32Array.from(record.layers.keys()))[index] = first.index;
        });
        this.headlines = new HeadlineTable(record.layers.length * GEMM_KINDS.length);
        break;
      case 'step':
        this.stepSeries.push(record);
        this.recentSteps.addStep(record.step, record.stepMs);
        if (record.step >= summary.lastStep) {
          summary.lastStep = record.step;
          summary.lastTokens = record.tokens;
          summary.lastLoss = record.loss;
        }
        break;
      case 'layerStats': {
        const layerSeries = this.declared.get(record.layer);
        if (!layerSeries) {
          return summary.config
            ? `layerStats for layer "${record.layer.slice(0, 200)}" refused: run ${record.runId}'s runStarted did not declare it`
            : `layerStats for run ${record.runId} refused: its runStarted (which declares the layers) was not received`;
        }
        let series = layerSeries[record.gemm];
        if (!series) {
          const identity = { runId: record.runId, layer: record.layer, gemm: record.gemm };
          const place = placeOf(layerSeries.index, record.gemm);
          // Made whole at the first series (as the headline table is), so that it stays a plain array.
          if (this.seriesAt.length === 0) this.seriesAt = Array.from({ length: this.headlines.places }, () => undefined);
          series = layerSeries[record.gemm] = this.seriesAt[place] = new LayerStatsSeries(this.statsPerSeries, identity, this.headlines, place);
        }
        series.push(record);
        this.statsIngested++;
        if (this.statsStepSeries.latest !== record.step) {
          this.statsStepSeries.push(record.step);
          this.recentSteps.addStatsStep(record.step);
        }
        break;
      }
      case 'validation':
        this.validationSeries.push(record);
        break;
      case 'runEnded':
        summary.ended = record;
        summary.status = record.status;
        summary.finalLoss = summary.lastLoss;
        break;
      case 'checkpointSaved':
        this.saved.push(record);
        break;
    }
    return undefined;
  }

  steps(): readonly StepRecord[] {
    return this.stepSeries.values();
  }
  validation(): readonly ValidationRecord[] {
    return this.validationSeries.values();
  }
  checkpoints(): readonly CheckpointSavedRecord[] {
    return this.saved;
  }
  statsSteps(): readonly number[] {
    return this.statsStepSeries.values();
  }
  layerStats(layer: string, gemm: GemmKind): readonly LayerStatsRecord[] {
    return this.declared.get(layer)?.[gemm]?.values() ?? [];
  }
  forEachLayerStat(layer: number, gemm: GemmKind, visit: (fields: GridFields, previous: GridFields | undefined) => void): number {
    const place = this.placeOfIndex(layer, gemm);
    return place < 0 ? 0 : (this.seriesAt[place]?.forEachKept(visit) ?? 0);
  }
  latestHeadline(layer: number, gemm: GemmKind): LayerStatsHeadline | undefined {
    const place = this.placeOfIndex(layer, gemm);
    return place < 0 ? undefined : this.headlines.at(place);
  }
  /** The place (placeOf) of `layers[layer]`'s `gemm`, its first's if it is named twice; -1 outside the layers. */
  private placeOfIndex(layer: number, gemm: GemmKind): number {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.layers.length) return -1;
    return placeOf(this.firstIndex ? this.firstIndex[layer]! : layer, gemm);
  }
  seriesKeys(): SeriesKey[] {
    const keys: SeriesKey[] = [];
    for (const [layer, series] of this.declared) for (const gemm of GEMM_KINDS) if (series[gemm]) keys.push(seriesKey(layer, gemm));
    return keys;
  }
  telemetryCost(): TelemetryCost | undefined {
    return this.recentSteps.cost();
  }
}

/**
 * Holds runs keyed by runId. A `runStarted` for a runId already held starts it afresh (a run log
 * opened again, or a trainer that reuses ids), so ingesting the same stream twice never doubles it.
 */
export class RunStore {
  readonly limits: StoreLimits;
  private readonly runsById = new Map<string, StoredRun>();
  private readonly listeners = new Set<(change: StoreChange) => void>();

  constructor(limits: Partial<StoreLimits> = {}) {
    const asked = { ...DEFAULT_STORE_LIMITS, ...limits };
    this.limits = {
      statsPerSeries: Math.min(asked.statsPerSeries, MAX_STORE_LIMITS.statsPerSeries),
      stepsPerRun: Math.min(asked.stepsPerRun, MAX_STORE_LIMITS.stepsPerRun),
      validationPerRun: Math.min(asked.validationPerRun, MAX_STORE_LIMITS.validationPerRun),
      runs: Math.min(asked.runs, MAX_STORE_LIMITS.runs),
    };
  }

  /**
   * Add one validated record. `dir` names the run-log directory of a loaded run. Returns why the
   * record was refused (e.g. layer stats for a layer its run did not declare), or undefined.
   */
  ingest(record: TelemetryRecord, source: RunSource = 'live', dir?: string): string | undefined {
    let run = this.runsById.get(record.runId);
    if (!run || record.type === 'runStarted') {
      if (run) this.runsById.delete(record.runId);
      run = new StoredRun(record.runId, source, this.limits, dir);
      this.runsById.set(record.runId, run);
      this.evictOverLimit(run);
    }
    const refused = run.ingest(record);
    if (refused === undefined) this.emit({ runId: record.runId, record });
    return refused;
  }

  /** Summaries of every run, oldest first. */
  list(): RunSummary[] {
    return [...this.runsById.values()].map((run) => run.summary);
  }

  get(runId: string): RunView | undefined {
    return this.runsById.get(runId);
  }

  remove(runId: string): boolean {
    const removed = this.runsById.delete(runId);
    if (removed) this.emit({ runId, removed: true });
    return removed;
  }

  /** Mark runs still `running` from `source` (all, or just `runId`) as `interrupted`: they ended without runEnded. */
  markOrphaned(source: RunSource = 'live', runId?: string): void {
    for (const run of this.runsById.values()) {
      if (runId !== undefined && run.summary.runId !== runId) continue;
      if (run.summary.source === source && run.summary.status === 'running') {
        run.summary.status = 'interrupted';
        this.emit({ runId: run.summary.runId });
      }
    }
  }

  onDidChange(listener: (change: StoreChange) => void): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  private emit(change: StoreChange): void {
    for (const listener of this.listeners) listener(change);
  }

  /** Drops the oldest finished runs; if every other run is live (a trainer inventing runIds), the oldest live ones too. */
  private evictOverLimit(keep: StoredRun): void {
    for (const spareLive of [true, false]) {
      for (const [runId, run] of this.runsById) {
        if (this.runsById.size <= this.limits.runs) return;
        if (run === keep || (spareLive && run.summary.status === 'running')) continue;
        this.runsById.delete(runId);
        this.emit({ runId, removed: true });
      }
    }
  }
}

// What one dashboard webview has been sent, and what to send it next: a full snapshot after `ready`
// or a resync, then deltas with only what changed since (new loss points, changed run info without
// its layers once sent, the overview rows of layers with new stats, new alerts).
import type { DeltaMessage, LayerDetailMessage, LayerGridMessage, RequestLayerGridMessage, RequestLayerMessage, SnapshotMessage } from '../protocol/webview.js';
import { layerGrid } from './layer-grid.js';
import type { RunStore } from '../store/run-store.js';
import type { AlertTracker } from './alerts.js';
import { layerDetail, layerOverviewSince, lossSlice, runInfo, runInfoKey } from './views.js';

interface RunCursor {
  /** The store's summary object of the run: a new one means the run restarted (same runId, new runStarted). */
  summary: object;
  step: number;
  validationStep: number;
  /** Per layer (RunInfo.layers order), the stats version of its overview row last sent, -1 before (views.ts layerOverviewSince). */
  layers: Float64Array;
  /** The run's statsIngested when its overview was last compared: unchanged, no row can have changed. */
  statsIngested: number;
  info: string;
}

/** Per-webview progress; a new run set (added/removed run) means a snapshot, not a delta. */
export interface FeedCursor {
  runIds: string;
  runs: Map<string, RunCursor>;
  alerts: number;
}

type StoreReader = Pick<RunStore, 'list' | 'get'>;

export class DashboardFeed {
  constructor(
    private readonly store: StoreReader,
    private readonly alerts: AlertTracker,
  ) {}

  snapshot(): { message: SnapshotMessage; cursor: FeedCursor } {
    const cursor: FeedCursor = { runIds: this.runIds(), runs: new Map(), alerts: 0 };
    const message: SnapshotMessage = { type: 'snapshot', ...this.changesSince(cursor) };
    return { message, cursor };
  }

  /** Changes since `cursor` (advanced in place), or null when the run set changed or a run restarted (send a snapshot). */
  delta(cursor: FeedCursor): DeltaMessage | null {
    if (cursor.runIds !== this.runIds()) return null;
    for (const [runId, seen] of cursor.runs) if (this.store.get(runId)?.summary !== seen.summary) return null;
    return { type: 'delta', ...this.changesSince(cursor) };
  }

  layerDetail(request: RequestLayerMessage): LayerDetailMessage | undefined {
    const run = this.store.get(request.runId);
    return run ? layerDetail(run, request) : undefined;
  }

  layerGrid(request: RequestLayerGridMessage): LayerGridMessage | undefined {
    const run = this.store.get(request.runId);
    return run ? layerGrid(run, request) : undefined;
  }

  private runIds(): string {
    return JSON.stringify(this.store.list().map((summary) => summary.runId));
  }

  private changesSince(cursor: FeedCursor): Omit<DeltaMessage, 'type'> {
    const changes: Omit<DeltaMessage, 'type'> = { runs: [], loss: [], validation: [], overview: [], alerts: [] };
    for (const summary of this.store.list()) {
      const run = this.store.get(summary.runId)!;
      const runId = summary.runId;
      let seen = cursor.runs.get(runId);
      if (!seen) cursor.runs.set(runId, (seen = { summary: run.summary, step: -1, validationStep: -1, layers: new Float64Array(run.layers.length).fill(-1), statsIngested: -1, info: '' }));
      const divergedAt = this.alerts.divergedAt(runId);
      const infoKey = runInfoKey(run, divergedAt);
      if (infoKey !== seen.info) {
        const { layers, ...info } = runInfo(run, divergedAt);
        // A run's layers are fixed by its runStarted (a new one is a new run: a snapshot): the page keeps those it was sent.
        changes.runs.push(seen.info === '' ? { ...info, layers } : info);
        seen.info = infoKey;
      }
      const loss = lossSlice(runId, run.steps(), seen.step);
      if (loss.step.length > 0) {
        changes.loss.push(loss);
        seen.step = loss.step[loss.step.length - 1]!;
      }
      const validation = lossSlice(runId, run.validation(), seen.validationStep);
      if (validation.step.length > 0) {
        changes.validation.push(validation);
        seen.validationStep = validation.step[validation.step.length - 1]!;
      }
      if (run.statsIngested !== seen.statsIngested) {
        const overview = layerOverviewSince(run, seen.layers);
        if (overview) changes.overview.push(overview);
        seen.statsIngested = run.statsIngested;
      }
    }
    const fresh = this.alerts.since(cursor.alerts);
    changes.alerts = fresh.alerts;
    cursor.alerts = fresh.cursor;
    return changes;
  }
}

// The webview's copy of the host's data: a snapshot replaces it, a delta appends loss points,
// replaces run info and the overview rows of the layers it carries (model/overview-update.ts). Layer details are cached per
// request key and dropped when their run's overview moves (new stats arrived).
import { WEBVIEW_LIMITS, type Alert, type DeltaMessage, type LayerDetailMessage, type LayerGridMessage, type LayerOverview, type LossSeries, type RunInfo, type SnapshotMessage } from '../../src/protocol/webview.js';
import { applyOverviewUpdate } from './model/overview-update.js';

export class DashboardData {
  runs: RunInfo[] = [];
  loss = new Map<string, LossSeries>();
  validation = new Map<string, LossSeries>();
  overview = new Map<string, LayerOverview>();
  alerts: Alert[] = [];
  /** Answers to layer requests (details and grids), by request key; dropped when their run gets new stats. */
  private details = new Map<string, LayerDetailMessage | LayerGridMessage>();

  applySnapshot(message: SnapshotMessage): void {
    this.runs = [];
    this.loss.clear();
    this.validation.clear();
    this.overview.clear();
    this.alerts = [];
    this.details.clear();
    this.applyDelta(message);
  }

  /** Returns the runIds whose layer stats changed (their cached details were dropped). */
  applyDelta(message: SnapshotMessage | DeltaMessage): Set<string> {
    for (const update of message.runs) {
      const at = this.runs.findIndex((run) => run.runId === update.runId);
      const layers = update.layers ?? this.runs[at]?.layers;
      if (!layers) throw new Error(`run info of ${update.runId} without its layers, which the page does not have`);
      const info: RunInfo = { ...update, layers };
      if (at >= 0) this.runs[at] = info;
      else this.runs.push(info);
    }
    append(this.loss, message.loss);
    append(this.validation, message.validation);
    const statsChanged = new Set<string>();
    for (const update of message.overview) {
      this.overview.set(update.runId, applyOverviewUpdate(update, this.run(update.runId)?.layers ?? [], this.overview.get(update.runId)));
      statsChanged.add(update.runId);
    }
    for (const key of [...this.details.keys()]) if (statsChanged.has(this.details.get(key)!.runId)) this.details.delete(key);
    this.alerts.push(...message.alerts);
    // The host keeps the newest WEBVIEW_LIMITS.alerts; so does the page, however many deltas come.
    if (this.alerts.length > WEBVIEW_LIMITS.alerts) this.alerts = this.alerts.slice(-WEBVIEW_LIMITS.alerts);
    return statsChanged;
  }

  run(runId: string): RunInfo | undefined {
    return this.runs.find((run) => run.runId === runId);
  }

  detail(key: string): LayerDetailMessage | undefined {
    const found = this.details.get(key);
    return found?.type === 'layerDetail' ? found : undefined;
  }

  grid(key: string): LayerGridMessage | undefined {
    const found = this.details.get(key);
    return found?.type === 'layerGrid' ? found : undefined;
  }

  storeDetail(key: string, detail: LayerDetailMessage | LayerGridMessage): void {
    this.details.set(key, detail);
  }
}

function append(target: Map<string, LossSeries>, slices: readonly LossSeries[]): void {
  for (const slice of slices) {
    const series = target.get(slice.runId);
    if (!series) {
      const copy: LossSeries = { runId: slice.runId, step: [...slice.step], tokens: [...slice.tokens], loss: [...slice.loss] };
      if (slice.gradNorm) copy.gradNorm = [...slice.gradNorm];
      if (slice.lr) copy.lr = [...slice.lr];
      target.set(slice.runId, copy);
      continue;
    }
    for (let i = 0; i < slice.step.length; i++) {
      series.step.push(slice.step[i]!);
      series.tokens.push(slice.tokens[i]!);
      series.loss.push(slice.loss[i]!);
      series.gradNorm?.push(slice.gradNorm?.[i] ?? null);
      series.lr?.push(slice.lr?.[i] ?? 0);
    }
  }
}

export function gridKey(runId: string, metric: string, gemm: string): string {
  return JSON.stringify([runId, 'grid', metric, gemm]);
}

export function detailKey(runId: string, layer: string, gemm: string, operand: string, lag: number): string {
  return JSON.stringify([runId, layer, gemm, operand, lag]);
}

// Alerts worth interrupting a user for, found as records arrive: NaN block scales, a loss spike,
// a layer whose ‖∇W‖/‖E‖ fell below √3 (the error is then large enough to stall learning), and
// divergence. Each fires once per episode (not once per layer or per step) and names the step and
// the first layer (and GEMM) whose metric moved; for loss events, the first one that left its
// running range in the stats steps before the event.
import { wgradErrorNote } from '../protocol/config.js';
import { layerMetric } from '../protocol/layer-metrics.js';
import { WEBVIEW_LIMITS, type Alert } from '../protocol/webview.js';
import type { LayerStatsRecord, TelemetryRecord } from '../protocol/telemetry.js';
import { describeDeparture, DepartureTracker } from './departures.js';

export const GRAD_TO_ERR_FLOOR = Math.sqrt(3);

/** A loss event is traced back to layers that left their running range this many stats intervals before it
 * (a layer's interval: statsEvery, times statsLayerGroups when each stats step reports one group). */
const LOOKBACK_STATS_STEPS = 3;

/** EMA weight of the running loss mean/variance, and how far above the mean a spike is. */
const SPIKE = { weight: 0.95, sigmas: 6, minRelative: 0.1, warmup: 20 } as const;

interface Episode {
  active: boolean;
  /** The stats step being scanned, and whether the condition held anywhere in it so far. */
  step: number;
  seenThisStep: boolean;
}

interface RunAlertState {
  runId: string;
  lossMean: number;
  lossVar: number;
  lossCount: number;
  spiking: boolean;
  divergedAt: number | null;
  nan: Episode;
  gradToErr: Episode;
  /** Steps between two stats of one layer: statsEvery · statsLayerGroups. */
  layerStatsInterval: number;
  /** wgradErrorNote of the run's config (per-rank, sampled rows): its Wgrad error alerts say it. */
  wgradNote: string;
  departures: DepartureTracker;
  /** The newest checkpoint the trainer kept on its own (it has a reason: before a suspicious update). */
  keptCheckpoint: { step: number; path: string } | null;
}

function newEpisode(): Episode {
  return { active: false, step: -1, seenThisStep: false };
}

/** Alerts kept (the newest); older ones are dropped, as many as the webview accepts in a snapshot. */
export const MAX_ALERTS = WEBVIEW_LIMITS.alerts;
/** A trainer's reason text is clipped to this in alert messages (they must stay under the webview's limit). */
const MAX_REASON = 1000;

export class AlertTracker {
  private readonly runs = new Map<string, RunAlertState>();
  /** The newest alerts, oldest first; between MAX_ALERTS and 2 × MAX_ALERTS long before trimming. */
  private kept: Alert[] = [];
  /** Alerts raised since the tracker was made (the cursor space of `since`). */
  private total = 0;

  /** The kept alerts (at most MAX_ALERTS, the newest), oldest first. */
  get alerts(): readonly Alert[] {
    return this.kept.length > MAX_ALERTS ? this.kept.slice(-MAX_ALERTS) : this.kept;
  }

  /** Alerts raised after the first `cursor` of them that are still kept, and the cursor after them. */
  since(cursor: number): { alerts: Alert[]; cursor: number } {
    const firstKept = this.total - Math.min(this.kept.length, MAX_ALERTS);
    return { alerts: this.kept.slice(Math.max(cursor, firstKept) - (this.total - this.kept.length)), cursor: this.total };
  }

  divergedAt(runId: string): number | null {
    return this.runs.get(runId)?.divergedAt ?? null;
  }

  /** Feed one record; returns the alerts it raised. */
  ingest(record: TelemetryRecord): Alert[] {
    if (record.type === 'runStarted') this.runs.delete(record.runId);
    const state = this.state(record.runId);
    if (record.type === 'runStarted') {
      state.layerStatsInterval = record.config.statsEvery * (record.config.statsLayerGroups ?? 1);
      state.wgradNote = wgradErrorNote(record.config);
    }
    // Every layerStats record passes here: the checks push into `raised` through raise(), with no
    // closure made per record.
    const raised: Alert[] = [];
    switch (record.type) {
      case 'step':
        if (record.loss === null) this.diverge(state, record.step, 'loss is not finite', raised);
        else this.checkSpike(state, record.step, record.loss, raised, record.denseStats);
        break;
      case 'runEnded':
        if (record.status === 'diverged') this.diverge(state, record.step, clip(record.reason) || 'run ended as diverged', raised);
        break;
      case 'layerStats':
        this.checkLayer(state, record, raised);
        break;
      case 'checkpointSaved':
        if (record.reason !== undefined) state.keptCheckpoint = { step: record.step, path: record.path };
        break;
    }
    if (raised.length > 0) this.keep(raised);
    return raised;
  }

  private raise(raised: Alert[], state: RunAlertState, alert: Omit<Alert, 'runId'>): void {
    raised.push({ runId: state.runId, ...alert });
  }

  private keep(raised: Alert[]): void {
    this.kept.push(...raised);
    this.total += raised.length;
    // Trim in batches so keeping is amortised O(1) per alert.
    if (this.kept.length >= 2 * MAX_ALERTS) this.kept = this.kept.slice(-MAX_ALERTS);
  }

  private state(runId: string): RunAlertState {
    let state = this.runs.get(runId);
    if (!state) {
      // Per-run state of runs long gone (the store keeps at most WEBVIEW_LIMITS.runs) goes first.
      if (this.runs.size >= WEBVIEW_LIMITS.runs) this.runs.delete(this.runs.keys().next().value!);
      state = { runId, lossMean: 0, lossVar: 0, lossCount: 0, spiking: false, divergedAt: null, nan: newEpisode(), gradToErr: newEpisode(), layerStatsInterval: 10, wgradNote: '', departures: new DepartureTracker(), keptCheckpoint: null };
      this.runs.set(runId, state);
    }
    return state;
  }

  private diverge(state: RunAlertState, step: number, why: string, raised: Alert[]): void {
    if (state.divergedAt !== null) return;
    state.divergedAt = step;
    const alert = this.firstMover(state, step, `Diverged at step ${step}: ${why}`);
    const kept = state.keptCheckpoint;
    // A checkpoint the trainer kept before this event (it writes one before the diverging update).
    if (kept !== null && kept.step < step) {
      alert.message += ` Checkpoint from before it (step ${kept.step}): ${clip(kept.path)}; "Start Next Run from Checkpoint…" offers it.`;
      alert.checkpoint = kept.path;
    }
    this.raise(raised, state, { kind: 'divergence', step, ...alert });
  }

  /** The layer and GEMM that left their running range first before a loss event at `step`, in the alert. */
  private firstMover(state: RunAlertState, step: number, message: string): Pick<Alert, 'layer' | 'gemm' | 'metric' | 'message' | 'checkpoint'> {
    const first = state.departures.first(step - LOOKBACK_STATS_STEPS * state.layerStatsInterval, step);
    if (!first) return { layer: null, message: `${message}. No layer left its running range in the stats before it.` };
    const scope = state.wgradNote && layerMetric(first.gridMetric).wgradOnly ? ` (${state.wgradNote})` : '';
    return { layer: first.layer, gemm: first.gemm, metric: first.gridMetric, message: `${message}. First out of its running range: ${describeDeparture(first)}${scope}.` };
  }

  private checkSpike(state: RunAlertState, step: number, loss: number, raised: Alert[], dense?: { until: number }): void {
    const deviation = loss - state.lossMean;
    const sigma = Math.sqrt(state.lossVar);
    const isSpike = state.lossCount >= SPIKE.warmup && deviation > SPIKE.sigmas * sigma && deviation > SPIKE.minRelative * Math.abs(state.lossMean);
    if (isSpike && !state.spiking) {
      const alert = this.firstMover(state, step, `Loss spike at step ${step}: ${loss.toPrecision(4)} vs running mean ${state.lossMean.toPrecision(4)}`);
      // The trainer announced a dense-stats window: say where to look.
      if (dense) alert.message += ` The trainer takes layer stats at every step through step ${dense.until}.`;
      this.raise(raised, state, { kind: 'loss-spike', step, ...alert });
    }
    state.spiking = isSpike;
    if (isSpike) return; // a spike must not drag the baseline it is measured against
    if (state.lossCount === 0) state.lossMean = loss;
    else {
      state.lossMean += (1 - SPIKE.weight) * deviation;
      state.lossVar = SPIKE.weight * (state.lossVar + (1 - SPIKE.weight) * deviation * deviation);
    }
    state.lossCount++;
  }

  private checkLayer(state: RunAlertState, record: LayerStatsRecord, raised: Alert[]): void {
    state.departures.observe(record);
    let nanBlocks = 0;
    for (const operand of record.operands) nanBlocks += operand.histogram.nanBlocks;
    if (episode(state.nan, record.step, nanBlocks > 0)) {
      this.raise(raised, state, { kind: 'nan-scales', step: record.step, layer: record.layer, gemm: record.gemm, message: `NaN block scales at step ${record.step}, first in ${record.layer} (${record.gemm}, ${nanBlocks} blocks)` });
    }
    const ratio = record.wgradError?.gradToErr;
    if (record.gemm === 'wgrad' && episode(state.gradToErr, record.step, ratio !== undefined && ratio !== null && ratio < GRAD_TO_ERR_FLOOR)) {
      this.raise(raised, state, { kind: 'grad-to-err', step: record.step, layer: record.layer, gemm: 'wgrad', message: `‖∇W‖/‖E‖ = ${ratio!.toFixed(2)} < √3 at step ${record.step}, first in ${record.layer}${state.wgradNote && ` (${state.wgradNote})`}` });
    }
  }
}

function clip(text: string): string {
  return text.length > MAX_REASON ? `${text.slice(0, MAX_REASON)}…` : text;
}

/**
 * Advance an episode by one observation; true when this observation starts a new episode. An
 * episode ends when a whole stats step passes with the condition nowhere true.
 */
function episode(state: Episode, step: number, holds: boolean): boolean {
  if (step !== state.step) {
    if (state.step >= 0 && !state.seenThisStep) state.active = false;
    state.step = step;
    state.seenThisStep = false;
  }
  if (!holds) return false;
  state.seenThisStep = true;
  if (state.active) return false;
  state.active = true;
  return true;
}

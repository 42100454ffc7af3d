// What a run's telemetry costs its steps, read from the run's own step times: a trainer measures
// on its stats steps (and the bridge on the step before each, for lag-1), and runs as it would
// without MX Scope on the others. So the other steps are the run's own baseline, measured in the
// same process on the same machine, as bench_bridge.py's plain steps are (docs/bridge.md): the
// median of each kind of step, weighed by how many steps of each kind the window holds, against
// the median of the others.

/** Step times kept per run: enough for dozens of stats steps at statsEvery 10. */
export const RECENT_STEPS = 512;
/** Fewer steps without telemetry than this give no baseline worth dividing by. */
export const MIN_BASELINE_STEPS = 5;
/** Fewer timed stats steps than this leave a run's first one, which compiles kernels and warms caches, to set the median. */
export const MIN_STATS_STEPS = 3;

export interface TelemetryCost {
  /** Extra time over the window, as a fraction of the baseline: 0.08 = 8 % longer steps. */
  overhead: number;
  /** Median ms of the stats steps, of the steps just before one (undefined when none of them sent a step time), of the others. */
  statsMs: number;
  beforeStatsMs: number | undefined;
  baselineMs: number;
  /** Steps of each kind in the window, counted by step number (a trainer may send a step time for only some steps). */
  statsSteps: number;
  beforeStatsSteps: number;
  baselineSteps: number;
}

function median(values: number[]): number {
  values.sort((a, b) => a - b);
  const middle = values.length >> 1;
  return values.length % 2 ? values[middle]! : (values[middle - 1]! + values[middle]!) / 2;
}

/**
 * The cost over whole blocks of steps: from the oldest stats step at or after the first step time
 * given up to, not including, the newest stats step (its step time may not have come yet: the
 * Python bridge sends a step's record when the next step begins; and the steps after it may yet
 * turn out to precede one). Each kind of step is counted by step number and timed by the median of
 * the step times it sent: a trainer that sends a step time every few steps (a Trainer's
 * logging_steps) would otherwise weigh its stats steps by how often they fall on a logged step.
 * Steps just before a stats step that sent no time count as costing what the others do. Undefined
 * without MIN_STATS_STEPS timed stats steps and MIN_BASELINE_STEPS timed others in the window
 * (statsEvery 1, a run's first steps).
 */
export function telemetryCost(steps: ReadonlyArray<readonly [step: number, ms: number]>, statsSteps: ReadonlySet<number>): TelemetryCost | undefined {
  let oldestTimed = Infinity;
  for (const [step] of steps) oldestTimed = Math.min(oldestTimed, step);
  let first = Infinity;
  let last = -Infinity;
  for (const step of statsSteps) {
    if (step >= oldestTimed) first = Math.min(first, step);
    last = Math.max(last, step);
  }
  if (!(first < last)) return undefined;
  let statsCount = 0;
  const before = new Set<number>();
  for (const step of statsSteps) {
    if (step < first || step > last) continue;
    if (step < last) statsCount++;
    if (step > first && !statsSteps.has(step - 1)) before.add(step - 1);
  }
  const stats: number[] = [];
  const beforeStats: number[] = [];
  const baseline: number[] = [];
  for (const [step, ms] of steps) {
    if (step < first || step >= last) continue;
    if (statsSteps.has(step)) stats.push(ms);
    else if (before.has(step)) beforeStats.push(ms);
    else baseline.push(ms);
  }
  if (stats.length < MIN_STATS_STEPS || baseline.length < MIN_BASELINE_STEPS) return undefined;
  const statsMs = median(stats);
  const beforeStatsMs = beforeStats.length ? median(beforeStats) : undefined;
  const baselineMs = median(baseline);
  const count = last - first;
  const baselineSteps = count - statsCount - before.size;
  const total = statsCount * statsMs + before.size * (beforeStatsMs ?? baselineMs) + baselineSteps * baselineMs;
  const overhead = total / (count * baselineMs) - 1;
  // Step times of 0 (nothing to divide by) or up to Number.MAX_VALUE (sums past it) are valid records,
  // but give no cost a view can show.
  if (!Number.isFinite(overhead)) return undefined;
  return {
    overhead,
    statsMs, beforeStatsMs, baselineMs,
    statsSteps: statsCount, beforeStatsSteps: before.size, baselineSteps,
  };
}

/** The newest RECENT_STEPS step times of a run and the stats steps among them, bounded. */
export class RecentStepTimes {
  private readonly times: Array<readonly [number, number]> = [];
  private readonly stats = new Set<number>();
  private cached: TelemetryCost | undefined | null = null;

  addStep(step: number, ms: number): void {
    this.times.push([step, ms]);
    if (this.times.length > RECENT_STEPS) this.times.shift();
    this.cached = null;
  }

  addStatsStep(step: number): void {
    this.stats.add(step);
    // Stats steps older than every kept step time tell nothing: drop them, so the set stays bounded.
    if (this.stats.size > RECENT_STEPS) {
      const oldest = this.times.length ? this.times[0]![0] : step;
      for (const kept of this.stats) if (kept < oldest || this.stats.size > RECENT_STEPS) this.stats.delete(kept);
    }
    this.cached = null;
  }

  cost(): TelemetryCost | undefined {
    if (this.cached === null) this.cached = telemetryCost(this.times, this.stats);
    return this.cached;
  }
}

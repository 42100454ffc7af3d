// The quick-pick model behind "Set Stats Cadence and Coverage": how often the next run measures
// stats, what each stats step measures (every layer exactly, or one of the opt-ins that cut what
// telemetry costs a large model on a GPU), the next-run change a choice means, and what earlier runs
// with the same choice measured it to cost. No vscode here, so it is unit tested.
import { percentChange } from '../../shared/percent-change.js';
import type { NextRunConfig, RunConfig } from '../../protocol/index.js';
import type { TelemetryCost } from '../../store/step-cost.js';
import { t } from './localize.js';

/** Steps between two stats steps offered; the current interval is offered too when it is another. */
export const STATS_INTERVALS: readonly number[] = [10, 20, 50, 100];

export function intervalChoices(current: number | undefined): number[] {
  return current === undefined || STATS_INTERVALS.includes(current) ? [...STATS_INTERVALS] : [...STATS_INTERVALS, current].sort((a, b) => a - b);
}

/** What each stats step measures: RunConfig.statsLayerGroups, wgradErrorRowStride and wgradErrorLag1 (1, 1 and true: every layer, exact, with lag-1). */
export interface Coverage {
  statsLayerGroups: number;
  wgradErrorRowStride: number;
  wgradErrorLag1: boolean;
}

export interface CoverageChoice extends Coverage {
  label: string;
  detail: string;
}

const EXACT: Coverage = { statsLayerGroups: 1, wgradErrorRowStride: 1, wgradErrorLag1: true };
const groups = (n: number): Coverage => ({ ...EXACT, statsLayerGroups: n });
const rows = (n: number): Coverage => ({ ...EXACT, wgradErrorRowStride: n });
const NO_LAG1: Coverage = { ...EXACT, wgradErrorLag1: false };

// Labels and details are getters: they are read after activate() has installed the translator.
function choice(coverage: Coverage, text: () => { label: string; detail: string }): CoverageChoice {
  return { ...coverage, get label() { return text().label; }, get detail() { return text().detail; } };
}

export const COVERAGE_CHOICES: readonly CoverageChoice[] = [
  choice(EXACT, () => ({ label: t('Every layer, exact (default)'), detail: t("Every layer's operand stats and full-tensor Wgrad error, every stats step") })),
  ...[2, 4, 8].map((n) => choice(groups(n), () => ({
    label: t('1 in {0} layers per stats step (layer groups)', n),
    detail: t('Python bridge: layers take turns in {0} groups, each every {0} stats steps; values exact', n),
  }))),
  ...[4, 8].map((n) => choice(rows(n), () => ({
    label: rowsLabel(n),
    detail: t('Python bridge: every layer, exact operand stats; Wgrad error from every {0}th row of ∇W', n),
  }))),
  choice(NO_LAG1, () => ({
    label: t('Every layer, no lag-1 (opt-in)'),
    detail: t('Python bridge: every layer exact, no lag-1 cosine; the step before a stats step is free'),
  })),
];

/** "10 steps", or with the opt-in layer groups which share of the layers each stats step reports. */
export function statsCadence(every: number, groups: number): string {
  return groups === 1 ? t('{0} steps', every) : t('{0} steps, 1 of {1} layer groups each (a layer every {2} steps)', every, groups, every * groups);
}

/** What a run measures and how often, for the status bar's tooltip: "stats every 10 steps", "… · Wgrad error from 1 in 4 rows (estimate)". */
export function statsPlan(config: Pick<RunConfig, 'statsEvery' | 'statsLayerGroups' | 'wgradErrorRowStride' | 'wgradErrorLag1'>): string {
  const { statsLayerGroups, wgradErrorRowStride, wgradErrorLag1 } = coverageOf(config);
  const every = t('stats every {0}', statsCadence(config.statsEvery, statsLayerGroups));
  // "no lag-1", not the picker's "Every layer, no lag-1": beside layer groups "every layer" would contradict them.
  return [every, wgradErrorRowStride === 1 ? '' : rowsLabel(wgradErrorRowStride), wgradErrorLag1 ? '' : t('no lag-1 (opt-in)')].filter((part) => part !== '').join(' · ');
}

function rowsLabel(stride: number): string {
  return t('Wgrad error from 1 in {0} rows (estimate)', stride);
}

/** The coverage a config runs with (absent opt-ins: 1, 1 and lag-1 on). */
export function coverageOf(config: Pick<RunConfig, 'statsLayerGroups' | 'wgradErrorRowStride' | 'wgradErrorLag1'>): Coverage {
  return { statsLayerGroups: config.statsLayerGroups ?? 1, wgradErrorRowStride: config.wgradErrorRowStride ?? 1, wgradErrorLag1: config.wgradErrorLag1 ?? true };
}

export function sameCoverage(a: Coverage, b: Coverage): boolean {
  return a.statsLayerGroups === b.statsLayerGroups && a.wgradErrorRowStride === b.wgradErrorRowStride && a.wgradErrorLag1 === b.wgradErrorLag1;
}

/**
 * The change "stats every `statsEvery` steps with `coverage`", from the `current` coverage: an opt-in
 * is named when it changes (1 turns one off), so a change of interval alone stays one that a trainer
 * older than protocol 1.6, which knows no opt-in field, takes.
 */
export function coverageChange(statsEvery: number, coverage: Coverage, current: Coverage = EXACT): NextRunConfig {
  return {
    statsEvery,
    ...(coverage.statsLayerGroups !== current.statsLayerGroups ? { statsLayerGroups: coverage.statsLayerGroups } : {}),
    ...(coverage.wgradErrorRowStride !== current.wgradErrorRowStride ? { wgradErrorRowStride: coverage.wgradErrorRowStride } : {}),
    ...(coverage.wgradErrorLag1 !== current.wgradErrorLag1 ? { wgradErrorLag1: coverage.wgradErrorLag1 } : {}),
  };
}

/** A run the picker may quote: its name, config and measured telemetry cost. */
export interface MeasuredRun {
  name: string;
  config: RunConfig | undefined;
  cost: TelemetryCost | undefined;
}

/**
 * "measured +2.3 % in run NAME": the newest of `runs` (oldest first) that ran with this interval and
 * coverage and whose own steps measured what telemetry cost it; undefined when none did.
 */
export function measuredCost(runs: readonly MeasuredRun[], statsEvery: number, coverage: Coverage): string | undefined {
  for (let i = runs.length - 1; i >= 0; i--) {
    const { name, config, cost } = runs[i]!;
    if (cost && config && config.statsEvery === statsEvery && sameCoverage(coverageOf(config), coverage)) {
      return t('measured {0} in {1}', percentChange(cost.overhead), name);
    }
  }
  return undefined;
}

/** "every 20 steps · Every layer, exact (default)", as the confirmation says it. */
export function coverageSummary(statsEvery: number, coverage: Coverage): string {
  const chosen = COVERAGE_CHOICES.find((c) => sameCoverage(c, coverage));
  const what =
    chosen?.label ??
    (coverage.wgradErrorLag1
      ? t('{0} layer groups, Wgrad error from 1 in {1} rows', coverage.statsLayerGroups, coverage.wgradErrorRowStride)
      : t('{0} layer groups, Wgrad error from 1 in {1} rows, no lag-1', coverage.statsLayerGroups, coverage.wgradErrorRowStride));
  return t('every {0} steps · {1}', statsEvery, what);
}

// What the Runs view shows for each run: a label, a one-line description, and the config as child
// rows. Pure functions of a store summary, so the wording is tested without VS Code.
import { GEMM_KINDS, isBlockPrecision, scaleRuleOf } from '../../protocol/index.js';
import type { RunStatus } from '../../protocol/index.js';
import { withGemmNotes } from '../../shared/gemm-notes.js';
import { percentChange } from '../../shared/percent-change.js';
import type { RunSummary, RunView } from '../../store/run-store.js';
import type { TelemetryCost } from '../../store/step-cost.js';
import { t } from './localize.js';
import { recipeSummary } from './rotation-modes.js';
import { statsCadence } from './stats-coverage.js';

export interface RunRow {
  label: string;
  description: string;
  tooltip: string;
  /** A codicon id for the status. */
  icon: string;
}

export interface ConfigRow {
  label: string;
  value: string;
}

const STATUS_ICONS: Record<RunStatus, string> = {
  running: 'sync~spin',
  completed: 'pass',
  diverged: 'warning',
  stopped: 'debug-stop',
  failed: 'error',
  interrupted: 'debug-disconnect',
  unknown: 'question',
};

/** How a status reads in the Runs view. */
export function statusText(status: RunStatus): string {
  switch (status) {
    case 'running': return t('running');
    case 'completed': return t('completed');
    case 'diverged': return t('diverged');
    case 'stopped': return t('stopped');
    case 'failed': return t('failed');
    case 'interrupted': return t('ended without runEnded');
    case 'unknown': return t('unknown');
  }
}

export function formatLoss(loss: number | null | undefined): string {
  return loss === null || loss === undefined ? '—' : loss.toFixed(4);
}

/** Names longer than this are shown as preset · MXFP4 recipe · start time (the full name is in the tooltip). */
const LABEL_MAX = 28;

/** The run's name, or when that is long its preset, MXFP4 recipe (unless `withRecipe` is false) and start time. */
export function runLabel(summary: RunSummary, withRecipe = true): string {
  if (summary.name.length <= LABEL_MAX || !summary.config) return summary.name;
  const time = summary.startedAt?.match(/T(\d\d:\d\d)/)?.[1];
  return [summary.config.preset, withRecipe ? recipeSummary(summary.config) : undefined, time].filter((part) => part !== undefined).join(' · ');
}

export function runRow(summary: RunSummary): RunRow {
  const step = summary.lastStep >= 0 ? t('step {0}', summary.lastStep) : t('no steps yet');
  const loss = summary.finalLoss !== undefined ? t('final loss {0}', formatLoss(summary.finalLoss)) : t('loss {0}', formatLoss(summary.lastLoss));
  const origin = summary.source === 'loaded' ? ` · ${t('from log')}` : '';
  const tooltip = [
    `${summary.name} (${summary.runId})`,
    t('status: {0}', statusText(summary.status)) + (summary.ended ? ` — ${summary.ended.reason}` : ''),
    summary.startedAt ? t('started {0}', summary.startedAt) : undefined,
    summary.dir ? t('run log: {0}', summary.dir) : undefined,
  ].filter((line): line is string => line !== undefined).join('\n');
  return { label: runLabel(summary), description: `${statusText(summary.status)} · ${step} · ${loss}${origin}`, tooltip, icon: STATUS_ICONS[summary.status] };
}

/** The config rows; with the run's records (`run`), GEMM rows also say where the rotation was
 * padded or skipped and whether the stats are simulated MXFP4 (see dashboard/gemm-notes.ts). */
export function configRows(summary: RunSummary, run?: RunView): ConfigRow[] {
  const config = summary.config;
  if (!config) return [{ label: t('config'), value: t('not known (runStarted not received)') }];
  return [
    { label: t('preset'), value: config.preset },
    ...GEMM_KINDS.map((kind) => {
      const gemm = config.gemms[kind];
      const rotation = gemm.rotation === 'none' ? t('no rotation') : `${gemm.rotation} ${gemm.hadamardBlock}`;
      const details = [
        gemm.precision,
        rotation,
        gemm.rounding + (gemm.srPrescale ? ` ${t('(¾ prescale)')}` : ''),
        // The default (floor, 1×16) goes unsaid, as in describeGemm.
        gemm.precision === 'nvfp4' ? (gemm.nvfp4Weight2d ? t('weights in 16×16 tiles') : undefined) : scaleRuleOf(gemm) === 'floor' ? undefined : t('scale rule {0}', scaleRuleOf(gemm)),
      ];
      const value = isBlockPrecision(gemm.precision) ? details.filter((part) => part !== undefined).join(' · ') : gemm.precision;
      const latest = run ? run.layers.map((_, index) => run.latestHeadline(index, kind)) : [];
      return { label: kind, value: withGemmNotes(value, run?.layers ?? [], kind, latest) };
    }),
    { label: t('steps'), value: config.steps === 0 ? t('open-ended') : String(config.steps) },
    { label: t('tokens/step'), value: String(config.tokensPerStep) },
    { label: t('stats every'), value: statsCadence(config.statsEvery, config.statsLayerGroups ?? 1) },
    // Only the opt-in is named (wgradErrorScopeLabel's words, localized): by default, and with one
    // process, the error is the whole batch's.
    ...(config.wgradErrorScope === 'rank' ? [{ label: t('Wgrad error'), value: t("each rank's own, mean over ranks") }] : []),
    // Likewise only the opt-in sampling of ∇W's rows: by default the error is exact, from every row.
    ...(config.wgradErrorRowStride !== undefined && config.wgradErrorRowStride > 1 ? [{ label: t('Wgrad error rows'), value: t('1 in {0} (estimate)', config.wgradErrorRowStride) }] : []),
    // And lag-1 turned off: by default it is measured.
    ...(config.wgradErrorLag1 === false ? [{ label: t('Wgrad error lag-1'), value: t('off (opt-in: no step before a stats step measured)') }] : []),
    { label: t('seed'), value: String(config.seed) },
    { label: t('data'), value: config.data },
    ...telemetryCostRows(run?.telemetryCost()),
  ];
}

/** What the run's telemetry costs its steps, once its own steps without it give a baseline. */
function telemetryCostRows(cost: TelemetryCost | undefined): ConfigRow[] {
  if (!cost) return [];
  const percent = percentChange(cost.overhead);
  const ms = (value: number) => value.toFixed(value >= 100 ? 0 : 1);
  const steps = cost.statsSteps + cost.beforeStatsSteps + cost.baselineSteps;
  const value = cost.beforeStatsMs === undefined
    ? t('{0} step time over the last {1} steps (medians: stats steps {2} ms, others {3} ms)', percent, steps, ms(cost.statsMs), ms(cost.baselineMs))
    : t('{0} step time over the last {1} steps (medians: stats steps {2} ms, the steps before them {3} ms, others {4} ms)', percent, steps, ms(cost.statsMs), ms(cost.beforeStatsMs), ms(cost.baselineMs));
  return [{ label: t('telemetry cost'), value }];
}

// What the Runs view shows for each run: a label, a one-line description, and the config as child
// rows. Pure functions of a store summary, so the wording is tested without VS Code.
import { GEMM_KINDS, isBlockPrecision, scaleRuleOf } from '../../protocol/index.js';
import type { RunStatus } from '../../protocol/index.js';
import { withGemmNotes } from '../../shared/gemm-notes.js';
import type { RunSummary, RunView } from '../../store/run-store.js';
import { recipeSummary } from './rotation-modes.js';

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
  return status === 'interrupted' ? 'ended without runEnded' : status;
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
  const step = summary.lastStep >= 0 ? `step ${summary.lastStep}` : 'no steps yet';
  const loss = summary.finalLoss !== undefined ? `final loss ${formatLoss(summary.finalLoss)}` : `loss ${formatLoss(summary.lastLoss)}`;
  const origin = summary.source === 'loaded' ? ' · from log' : '';
  const tooltip = [
    `${summary.name} (${summary.runId})`,
    `status: ${statusText(summary.status)}${summary.ended ? ` — ${summary.ended.reason}` : ''}`,
    summary.startedAt ? `started ${summary.startedAt}` : undefined,
    summary.dir ? `run log: ${summary.dir}` : undefined,
  ].filter((line): line is string => line !== undefined).join('\n');
  return { label: runLabel(summary), description: `${statusText(summary.status)} · ${step} · ${loss}${origin}`, tooltip, icon: STATUS_ICONS[summary.status] };
}

/** The config rows; with the run's records (`run`), GEMM rows also say where the rotation was
 * padded or skipped and whether the stats are simulated MXFP4 (see dashboard/gemm-notes.ts). */
export function configRows(summary: RunSummary, run?: RunView): ConfigRow[] {
  const config = summary.config;
  if (!config) return [{ label: 'config', value: 'not known (runStarted not received)' }];
  return [
    { label: 'preset', value: config.preset },
    ...GEMM_KINDS.map((kind) => {
      const gemm = config.gemms[kind];
      const rotation = gemm.rotation === 'none' ? 'no rotation' : `${gemm.rotation} ${gemm.hadamardBlock}`;
      const details = [
        gemm.precision,
        rotation,
        `${gemm.rounding}${gemm.srPrescale ? ' (¾ prescale)' : ''}`,
        // The default (floor, 1×16) goes unsaid, as in describeGemm.
        gemm.precision === 'nvfp4' ? (gemm.nvfp4Weight2d ? 'weights in 16×16 tiles' : undefined) : scaleRuleOf(gemm) === 'floor' ? undefined : `scale rule ${scaleRuleOf(gemm)}`,
      ];
      const value = isBlockPrecision(gemm.precision) ? details.filter((part) => part !== undefined).join(' · ') : gemm.precision;
      const latest = run ? run.layers.map(({ name }) => run.latestLayerStats(name, kind)) : [];
      return { label: kind, value: withGemmNotes(value, run?.layers ?? [], kind, latest) };
    }),
    { label: 'steps', value: config.steps === 0 ? 'open-ended' : String(config.steps) },
    { label: 'tokens/step', value: String(config.tokensPerStep) },
    { label: 'stats every', value: `${config.statsEvery} steps` },
    { label: 'seed', value: String(config.seed) },
    { label: 'data', value: config.data },
  ];
}

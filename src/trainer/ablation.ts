// The seed paper's ablation: starting from an FP8 baseline, move Fprop, Dgrad and Wgrad to MXFP4 one
// after another, then try the remedies for the Wgrad error (stochastic rounding, random Hadamard,
// deterministic H16, and the production recipe in between: random signs fixed for the run, as
// TransformerEngine's NVFP4 Wgrad rotation). Each run's cost is the tokens it needs to reach a
// target validation loss.
import type { GemmConfig, GemmConfigs, RunConfig } from '../protocol/config.js';
import type { RunEndedRecord, ValidationRecord } from '../protocol/telemetry.js';

export interface AblationRun {
  label: string;
  gemms: GemmConfigs;
}

const FP8: GemmConfig = { precision: 'fp8', rotation: 'none', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false };
const MXFP4: GemmConfig = { ...FP8, precision: 'mxfp4' };
const SR: GemmConfig = { ...MXFP4, rounding: 'stochastic', srPrescale: true };

/** The 8 runs, in order. Remedies apply to the backward GEMMs (SR) or to Wgrad (rotations), as in the paper. */
export const ABLATION_SERIES: readonly AblationRun[] = [
  { label: 'FP8 baseline', gemms: { fprop: FP8, dgrad: FP8, wgrad: FP8 } },
  { label: '+Fprop MXFP4', gemms: { fprop: MXFP4, dgrad: FP8, wgrad: FP8 } },
  { label: '+Dgrad MXFP4', gemms: { fprop: MXFP4, dgrad: MXFP4, wgrad: FP8 } },
  { label: '+Wgrad MXFP4 (full)', gemms: { fprop: MXFP4, dgrad: MXFP4, wgrad: MXFP4 } },
  { label: 'full + SR', gemms: { fprop: MXFP4, dgrad: SR, wgrad: SR } },
  { label: 'full + random Hadamard', gemms: { fprop: MXFP4, dgrad: MXFP4, wgrad: { ...MXFP4, rotation: 'random-hadamard' } } },
  { label: 'full + Hadamard H16', gemms: { fprop: MXFP4, dgrad: MXFP4, wgrad: { ...MXFP4, rotation: 'hadamard' } } },
  { label: 'full + fixed random-sign H16', gemms: { fprop: MXFP4, dgrad: MXFP4, wgrad: { ...MXFP4, rotation: 'fixed-sign-hadamard' } } },
];

/** Ablation defaults per preset, chosen so the 8 runs fit in a few minutes on 2 cores (tiny). */
export const ABLATION_DEFAULTS: Record<string, { steps: number; evalEvery: number }> = {
  tiny: { steps: 300, evalEvery: 10 },
  small: { steps: 600, evalEvery: 25 },
};

export function ablationConfig(base: RunConfig, run: AblationRun): RunConfig {
  return { ...base, gemms: structuredClone(run.gemms) };
}

/**
 * Tokens at which the validation loss first reaches `target`, interpolated linearly between the two
 * evaluations around the crossing; undefined if it never does.
 */
export function tokensToTarget(validation: readonly ValidationRecord[], target: number): number | undefined {
  let previous = { tokens: 0, loss: Infinity };
  for (const record of validation) {
    if (record.loss === null) return undefined;
    if (record.loss <= target) {
      if (!Number.isFinite(previous.loss)) return record.tokens;
      const fraction = (previous.loss - target) / (previous.loss - record.loss);
      return previous.tokens + fraction * (record.tokens - previous.tokens);
    }
    previous = { tokens: record.tokens, loss: record.loss };
  }
  return undefined;
}

/**
 * The default target: the baseline's validation loss halfway through its run, so runs that need up
 * to twice the baseline's tokens still reach it within theirs.
 */
export function defaultTarget(baseline: readonly ValidationRecord[]): number | undefined {
  const finite = baseline.filter((r) => r.loss !== null);
  if (finite.length === 0) return undefined;
  return finite[Math.ceil(finite.length / 2) - 1]!.loss!;
}

export interface AblationResult {
  label: string;
  runId: string;
  ended: RunEndedRecord;
  validation: ValidationRecord[];
}

/** A plain-text table: tokens to target and extra tokens against the baseline (the first run). */
export function formatAblationTable(results: readonly AblationResult[], target: number, tokensPerRun: number): string {
  const baseline = results[0] === undefined ? undefined : tokensToTarget(results[0].validation, target);
  const rows = results.map((result) => {
    const tokens = tokensToTarget(result.validation, target);
    const finalLoss = result.validation.at(-1)?.loss;
    const extra = tokens === undefined || baseline === undefined ? (baseline === undefined ? 'n/a' : `> ${(((tokensPerRun / baseline) - 1) * 100).toFixed(1)}%`) : `${(((tokens / baseline) - 1) * 100).toFixed(1)}%`;
    return [result.label, tokens === undefined ? `not reached (> ${tokensPerRun})` : Math.round(tokens).toString(), extra, finalLoss == null ? '—' : finalLoss.toFixed(4), result.ended.status, result.runId];
  });
  const header = ['run', `tokens to val loss ${target.toFixed(4)}`, 'extra tokens', 'final val loss', 'status', 'run id'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

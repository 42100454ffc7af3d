// The token-overhead table: tokens each run needed to reach a target validation loss and the extra
// percentage over the baseline run. Recomputed on every delta, so it fills in live.
import { defaultTargetLoss, overheadTable, type OverheadRow } from '../model/overhead.js';
import { dropdown, textField } from '../../ui/toolkit.js';
import type { RunInfo } from '../../../src/protocol/webview.js';
import { element, formatNumber, formatTokens, type Context, type View } from '../context.js';
import { extraPctInterval, indistinguishable, meanInterval, type Interval } from '../../../src/shared/intervals.js';
import { groupName, seedGroups } from '../model/seed-groups.js';
import { signedFixed } from '../../../src/shared/percent-change.js';

export class OverheadView implements View {
  readonly root = element('div', 'view overhead-view');
  private readonly table = element('table', 'grid');
  private readonly note = element('p', 'note');
  private rows: OverheadRow[] = [];
  private target: number | null = null;
  private groupCsv: (string | number | null)[][] = [];

  constructor(private readonly ctx: Context) {
    const bar = element('div', 'controls');
    const runs = ctx.data.runs.map((run) => ({ value: run.runId, label: `baseline: ${run.name}` }));
    bar.append(element('label', 'control', 'Target validation loss'));
    bar.append(textField(ctx.state.targetLoss === null ? '' : String(ctx.state.targetLoss), 'auto', (text) => {
      const value = Number(text);
      ctx.update({ targetLoss: text.trim() === '' || !Number.isFinite(value) ? null : value });
    }));
    if (runs.length > 0) bar.append(dropdown(runs, this.baselineId(), (baselineRunId) => ctx.update({ baselineRunId }), 'baseline run'));
    this.root.append(bar, this.note, this.table);
  }

  private baselineId(): string | null {
    const { state, data } = this.ctx;
    return state.baselineRunId && data.run(state.baselineRunId) ? state.baselineRunId : (data.runs[0]?.runId ?? null);
  }

  update(): void {
    const { data, state } = this.ctx;
    const runs = this.ctx.shownRuns();
    const curves = runs.map((run) => data.validation.get(run.runId) ?? { runId: run.runId, tokens: [], loss: [] });
    this.target = state.targetLoss ?? defaultTargetLoss(curves);
    const baseline = this.baselineId();
    this.rows = this.target === null ? [] : overheadTable(curves, baseline, this.target);
    this.note.textContent =
      this.target === null
        ? 'No validation loss yet: the table fills in once runs report validation.'
        : `Tokens to reach validation loss ${formatNumber(this.target, 4)}${state.targetLoss === null ? ' (auto: the highest of the runs\' best validation losses, so every run reaches it)' : ''}; extra % is over the baseline.`;
    const head = element('tr');
    for (const title of ['Run', 'Wgrad', 'Tokens to target', 'Extra tokens']) head.append(element('th', undefined, title));
    const body = this.rows.map((row) => {
      const run = data.run(row.runId)!;
      const tr = element('tr', row.runId === baseline ? 'baseline' : undefined);
      const name = element('td');
      const swatch = element('span', 'swatch');
      swatch.style.borderColor = this.ctx.color(row.runId);
      name.append(swatch, run.name + (row.runId === baseline ? ' (baseline)' : ''));
      const extra = row.extraPct === null ? '—' : `${signedFixed(row.extraPct)} %`;
      tr.append(name, element('td', undefined, run.gemms.wgrad), element('td', 'num', formatTokens(row.tokens)), element('td', row.extraPct !== null && row.extraPct > 0 ? 'num worse' : 'num', extra));
      return tr;
    });
    this.table.replaceChildren(head, ...body, ...this.groupRows(runs, baseline));
  }

  /**
   * One row per seed group among the shown runs: mean tokens to target with its 95 % interval, and
   * the extra tokens over the baseline (its group's mean when it has seeds) with a Welch interval.
   */
  private groupRows(runs: readonly RunInfo[], baseline: string | null): HTMLElement[] {
    // Groups come from every run held (names match the Loss tab's toggles), with their shown members.
    const shown = new Set(runs.map((run) => run.runId));
    const groups = seedGroups(this.ctx.data.runs)
      .filter((group) => !this.ctx.state.ungroupedSeeds.includes(group.key))
      .map((group) => ({ ...group, runs: group.runs.filter((run) => shown.has(run.runId)) }))
      .filter((group) => group.runs.length >= 2);
    this.groupCsv = [];
    if (groups.length === 0 || this.target === null) return [];
    const tokensOf = (runId: string) => this.rows.find((row) => row.runId === runId)?.tokens ?? null;
    const reached = (members: readonly RunInfo[]) => members.map((run) => tokensOf(run.runId)).filter((t): t is number => t !== null);
    const baseGroup = groups.find((group) => group.runs.some((run) => run.runId === baseline));
    const baseValues = baseGroup ? reached(baseGroup.runs) : baseline && tokensOf(baseline) !== null ? [tokensOf(baseline)!] : [];
    const title = element('tr', 'group-title');
    title.append(Object.assign(element('th', undefined, 'Seed groups: mean and 95 % interval across seeds'), { colSpan: 4 }));
    return [
      title,
      ...groups.map((group) => {
        const values = reached(group.runs);
        const tokens = values.length > 0 ? meanInterval(values) : null;
        const extra = group === baseGroup ? null : extraPctInterval(values, baseValues);
        const tr = element('tr', 'group');
        const name = element('td');
        const swatch = element('span', 'swatch');
        swatch.style.borderColor = this.ctx.color(group.runs[0]!.runId);
        name.append(swatch, `${groupName(group)} (${values.length} of ${group.runs.length} seeds${group === baseGroup ? ', baseline' : ''})`);
        const pm = (i: Interval) => (Number.isFinite(i.hi) ? ` ± ${formatTokens((i.hi - i.lo) / 2)}` : '');
        const tokenText = tokens ? `${formatTokens(tokens.mean)}${pm(tokens)}` : 'not reached';
        const extraText = !extra ? '—' : Number.isFinite(extra.hi) ? `${signedFixed(extra.mean)} % [${signedFixed(extra.lo)}, ${signedFixed(extra.hi)}]${indistinguishable(extra) ? ' · not distinguishable from the baseline' : ''}` : `${signedFixed(extra.mean)} % (one run each: no interval)`;
        const worse = extra !== null && Number.isFinite(extra.lo) && extra.lo > 0;
        tr.append(name, element('td', undefined, group.runs[0]!.gemms.wgrad), element('td', 'num', tokenText), element('td', worse ? 'num worse' : 'num', extraText));
        this.groupCsv.push([group.key, `${groupName(group)} (${values.length} seeds)`, this.target, tokens?.mean ?? null, tokens && Number.isFinite(tokens.lo) ? tokens.lo : null, tokens && Number.isFinite(tokens.hi) ? tokens.hi : null, extra?.mean ?? null, extra && Number.isFinite(extra.lo) ? extra.lo : null, extra && Number.isFinite(extra.hi) ? extra.hi : null]);
        return tr;
      }),
    ];
  }

  csv() {
    return {
      name: 'token-overhead.csv',
      header: ['run_id', 'run', 'target_loss', 'tokens', 'tokens_ci95_lo', 'tokens_ci95_hi', 'extra_pct', 'extra_pct_ci95_lo', 'extra_pct_ci95_hi'],
      // Single runs, then seed groups (run_id = the group's key).
      rows: [...this.rows.map((row) => [row.runId, this.ctx.data.run(row.runId)?.name ?? row.runId, this.target, row.tokens, null, null, row.extraPct, null, null]), ...this.groupCsv],
    };
  }

  canvas(): null {
    return null;
  }

  destroy(): void {}
}

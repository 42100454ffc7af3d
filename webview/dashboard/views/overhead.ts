// The token-overhead table: tokens each run needed to reach a target validation loss and the extra
// percentage over the baseline run. Recomputed on every delta, so it fills in live.
import { defaultTargetLoss, overheadTable, type OverheadRow } from '../model/overhead.js';
import { dropdown, textField } from '../../ui/toolkit.js';
import { element, formatNumber, formatTokens, type Context, type View } from '../context.js';

export class OverheadView implements View {
  readonly root = element('div', 'view overhead-view');
  private readonly table = element('table', 'grid');
  private readonly note = element('p', 'note');
  private rows: OverheadRow[] = [];
  private target: number | null = null;

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
      const extra = row.extraPct === null ? '—' : `${row.extraPct >= 0 ? '+' : ''}${row.extraPct.toFixed(1)} %`;
      tr.append(name, element('td', undefined, run.gemms.wgrad), element('td', 'num', formatTokens(row.tokens)), element('td', row.extraPct !== null && row.extraPct > 0 ? 'num worse' : 'num', extra));
      return tr;
    });
    this.table.replaceChildren(head, ...body);
  }

  csv() {
    return {
      name: 'token-overhead.csv',
      header: ['run_id', 'run', 'target_loss', 'tokens', 'extra_pct'],
      rows: this.rows.map((row) => [row.runId, this.ctx.data.run(row.runId)?.name ?? row.runId, this.target, row.tokens, row.extraPct]),
    };
  }

  canvas(): null {
    return null;
  }

  destroy(): void {}
}

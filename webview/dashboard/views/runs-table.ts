// The runs table: the configs of the shown runs side by side (each GEMM's precision, rotation,
// block and rounding; seed; steps; outcome), columns whose values differ highlighted (and the cells
// that differ from the most common value), sortable by any column; a row shows that run alone on
// the Loss tab.
import { wgradErrorDescription } from '../../../src/protocol/config.js';
import type { RunInfo } from '../../../src/protocol/webview.js';
import { percentChange } from '../../../src/shared/percent-change.js';
import { activatable, element, type Context, type View } from '../context.js';

interface Column {
  title: string;
  value(run: RunInfo): string;
  /** Sort key (numbers sort as numbers). */
  key?(run: RunInfo): number;
  /** A measurement, not a setting: never highlighted as a setting that differs. */
  measured?: boolean;
}

const COLUMNS: Column[] = [
  { title: 'Run', value: (run) => run.name },
  { title: 'Fprop', value: (run) => run.gemms.fprop },
  { title: 'Dgrad', value: (run) => run.gemms.dgrad },
  { title: 'Wgrad', value: (run) => run.gemms.wgrad },
  { title: 'Seed', value: (run) => (run.seed === undefined ? '—' : String(run.seed)), key: (run) => run.seed ?? -Infinity },
  { title: 'Steps', value: (run) => (run.steps === undefined ? '—' : run.steps === 0 ? 'open-ended' : String(run.steps)), key: (run) => run.steps ?? -Infinity },
  { title: 'Layer stats', value: statsCadence },
  { title: 'Wgrad error', value: wgradErrorDescription },
  { title: 'Outcome', value: outcome },
  { title: 'Telemetry cost', value: telemetryCost, key: (run) => run.telemetryCost ?? -Infinity, measured: true },
];

/** "+8.2 %": how much longer the run's steps are with telemetry than without (docs/user-guide.md). */
function telemetryCost(run: RunInfo): string {
  return run.telemetryCost === undefined ? '—' : percentChange(run.telemetryCost);
}

/** "every 20 steps", or with the opt-in layer groups which share of the layers each stats step reports. */
function statsCadence(run: RunInfo): string {
  const groups = run.statsLayerGroups ?? 1;
  if (groups === 1) return `every ${run.statsEvery} steps`;
  return `every ${run.statsEvery} steps, 1 of ${groups} layer groups each (a layer every ${run.statsEvery * groups} steps)`;
}

function outcome(run: RunInfo): string {
  if (run.divergedAt !== null) return `diverged at step ${run.divergedAt}`;
  return run.status === 'running' ? 'running' : run.status;
}

export class RunsTableView implements View {
  readonly root = element('div', 'view runs-view');
  private readonly table = element('table', 'grid runs-table');
  private readonly note = element('p', 'note');
  private rows: RunInfo[] = [];

  constructor(private readonly ctx: Context) {
    this.root.append(this.note, this.table);
  }

  update(): void {
    const runs = this.ctx.shownRuns();
    const { column, descending } = this.ctx.state.runsSort;
    const sortBy = COLUMNS[column] ?? COLUMNS[0]!;
    const sign = descending ? -1 : 1;
    this.rows = [...runs].sort((a, b) => {
      const order = sortBy.key ? sortBy.key(a) - sortBy.key(b) : sortBy.value(a).localeCompare(sortBy.value(b), undefined, { numeric: true });
      return sign * order || a.name.localeCompare(b.name);
    });
    // Which columns differ across the shown runs, and each column's most common value.
    const common = COLUMNS.map((col) => mostCommon(runs.map((run) => col.value(run))));
    const differs = COLUMNS.map((col, i) => i > 0 && !col.measured && new Set(runs.map((run) => col.value(run))).size > 1);
    const settings = COLUMNS.filter((col, i) => i > 0 && !col.measured).length;
    this.note.textContent = `${runs.length} runs; ${differs.filter(Boolean).length} of ${settings} settings differ (highlighted). Click a header to sort, a row to show that run alone on the Loss tab.`;
    const head = element('tr');
    COLUMNS.forEach((col, i) => {
      const th = element('th', [i === column ? 'sorted' : '', differs[i] ? 'differs' : ''].filter(Boolean).join(' ') || undefined, `${col.title}${i === column ? (descending ? ' ▲' : ' ▼') : ''}`);
      head.append(activatable(th, () => this.ctx.update({ runsSort: { column: i, descending: i === column ? !descending : false } }), `Sort by ${col.title}`));
    });
    const body = this.rows.map((run) => {
      const tr = activatable(element('tr'), () => this.ctx.update({ runIds: [run.runId], mode: 'single', tab: 'loss' }, true), `Show ${run.name} alone on the Loss tab`);
      COLUMNS.forEach((col, i) => {
        const value = col.value(run);
        const td = element('td', differs[i] && value !== common[i] ? 'differs' : undefined, value);
        if (i === 0) {
          const swatch = element('span', 'swatch');
          swatch.style.borderColor = this.ctx.color(run.runId);
          td.prepend(swatch);
        }
        tr.append(td);
      });
      return tr;
    });
    this.table.replaceChildren(head, ...body);
  }

  csv() {
    return { name: 'runs.csv', header: ['run_id', ...COLUMNS.map((col) => col.title.toLowerCase())], rows: this.rows.map((run) => [run.runId, ...COLUMNS.map((col) => col.value(run))]) };
  }

  canvas(): null {
    return null;
  }

  destroy(): void {}
}

function mostCommon(values: readonly string[]): string | undefined {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0];
}

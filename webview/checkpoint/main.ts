// The checkpoint webview (custom editor for one checkpoint, or the Compare Checkpoints panel): shows
// progress while the host analyses, then the result, or the error when the file is not a valid
// checkpoint. Rotation block and pass are chosen here and analysed by the host.
import './checkpoint.css';
import { formatBytes } from '../../src/shared/checkpoint-format.js';
import { SAMPLED_SQNR_ROWS, type CheckpointComparison, type CheckpointReport } from '../../src/protocol/checkpoint-report.js';
import { checkpointHostMessageSchema, type CheckpointHostMessage, type CheckpointWebviewMessage } from '../../src/protocol/checkpoint-webview.js';
import { HADAMARD_BLOCKS, type HadamardBlock } from '../../src/protocol/config.js';
import { tryCheck } from '../../src/protocol/validate.js';
import { element } from '../dashboard/context.js';
import { onThemeChange, readTheme } from '../dashboard/theme.js';
import { checkbox, dropdown, registerToolkit, textField } from '../ui/toolkit.js';
import { vscodeApi, type VsCodeApi } from '../ui/vscode-api.js';
import { renderComparison } from './compare-view.js';
import { renderReport } from './report-view.js';
import type { TableState } from './table.js';

interface UiState {
  filter: string;
  tensors: TableState;
  diffs: TableState;
}

const DEFAULT_STATE: UiState = {
  filter: '',
  tensors: { sortColumn: 0, descending: false, selected: null },
  // Comparisons open with the most changed tensor first (column 3 is the relative change).
  diffs: { sortColumn: 3, descending: true, selected: null },
};

type Shown = { type: 'waiting' } | Extract<CheckpointHostMessage, { type: 'progress' | 'error' }> | { type: 'report'; report: CheckpointReport } | { type: 'comparison'; comparison: CheckpointComparison };

class CheckpointPage {
  private state: UiState;
  private shown: Shown = { type: 'waiting' };
  private readonly header = element('header', 'top');
  private readonly body = element('main', 'content');

  constructor(private readonly vscode: VsCodeApi<CheckpointWebviewMessage>) {
    this.state = { ...DEFAULT_STATE, ...(vscode.getState() as Partial<UiState> | undefined) };
    registerToolkit();
    document.body.append(this.header, this.body);
    window.addEventListener('message', (event: MessageEvent<unknown>) => this.receive(event.data));
    onThemeChange(() => this.render());
    window.addEventListener('resize', () => this.render());
    this.render();
    vscode.postMessage({ type: 'ready' });
  }

  private receive(raw: unknown): void {
    const checked = tryCheck(checkpointHostMessageSchema, raw);
    if (!checked.ok) {
      console.error(`MX Scope checkpoint view: ignoring a malformed host message: ${checked.error.message}`);
      return;
    }
    this.shown = checked.value;
    this.render();
  }

  /** `keepHeader`: leave the controls alone (typing in the filter keeps focus). */
  private update(patch: Partial<UiState>, how: { keepHeader?: boolean } = {}): void {
    this.state = { ...this.state, ...patch };
    this.vscode.setState(this.state);
    if (how.keepHeader) this.renderBody();
    else this.render();
  }

  /** Asks the host to analyse again with one setting changed from those of the report on screen. */
  private reanalyse(options: CheckpointReport['options'], change: Partial<Pick<CheckpointReport['options'], 'hadamardBlock' | 'mode' | 'sqnrRows'>>): void {
    const next = { ...options, ...change };
    this.vscode.postMessage({ type: 'analyse', hadamardBlock: next.hadamardBlock, mode: next.mode, sqnrRows: next.sqnrRows });
  }

  /** The controls show what the shown report was computed with (the host may pick the fast pass for a huge file). */
  private controls(options: CheckpointReport['options']): HTMLElement {
    const row = element('div', 'controls');
    const block = element('label', 'control');
    block.append(
      element('span', undefined, 'Hadamard block'),
      dropdown(
        HADAMARD_BLOCKS.map((size) => ({ value: String(size), label: String(size) })),
        String(options.hadamardBlock),
        (value) => this.reanalyse(options, { hadamardBlock: Number(value) as HadamardBlock }),
        'Block size of the deterministic Hadamard rotation the second SQNR column is measured under',
      ),
    );
    const fast = checkbox('Histogram only (fast)', options.mode === 'histogram', (on) => this.reanalyse(options, { mode: on ? 'histogram' : 'full' }));
    fast.title = 'Only the exponent pass: scale histograms and outlier blocks, no saturation, flush or SQNR';
    const everyRow = checkbox('SQNR on every row', options.sqnrRows === 0, (on) => this.reanalyse(options, { sqnrRows: on ? 0 : SAMPLED_SQNR_ROWS, mode: 'full' }));
    everyRow.title = `Exact SQNR over every row (slow on large tensors) instead of ${SAMPLED_SQNR_ROWS} evenly spaced rows per tensor`;
    const filter = textField(this.state.filter, 'Filter tensors', (value) => this.update({ filter: value }, { keepHeader: true }));
    filter.classList.add('filter');
    row.append(block, fast, everyRow, filter);
    return row;
  }

  private renderHeader(): void {
    this.header.replaceChildren();
    const shown = this.shown;
    if (shown.type === 'report') {
      const { report } = shown;
      const analysed = report.tensors.filter((t) => t.analysis).length;
      const shards = report.shards.length > 1 ? ` · ${report.shards.length} shards` : '';
      this.header.append(
        element('h2', 'path', report.path),
        element('div', 'summary muted', `${report.tensors.length} tensors · ${formatBytes(report.dataBytes)}${shards} · ${analysed} weight matrices analysed in ${report.seconds.toFixed(2)} s${report.options.mode === 'histogram' ? ' (histogram-only pass: untick it for saturation, flush and SQNR)' : ''} · MXFP4 E2M1, 32-element blocks, E8M0 scales`),
        this.controls(report.options),
      );
    } else if (shown.type === 'comparison') {
      const { comparison } = shown;
      this.header.append(
        element('h2', 'path', 'Compare checkpoints'),
        element('div', 'summary', `A: ${comparison.a}`),
        element('div', 'summary', `B: ${comparison.b}`),
        element('div', 'summary muted', `${comparison.matched.length} tensors in both · ${comparison.onlyInA.length} only in A · ${comparison.onlyInB.length} only in B · compared in ${comparison.seconds.toFixed(2)} s`),
      );
    }
  }

  private render(): void {
    this.renderHeader();
    this.renderBody();
  }

  private renderBody(): void {
    this.body.replaceChildren();
    const shown = this.shown;
    let draws: (() => void)[] = [];
    if (shown.type === 'waiting') {
      this.body.append(element('p', 'muted', 'Opening checkpoint…'));
    } else if (shown.type === 'progress') {
      const bar = element('progress', 'progress');
      bar.max = Math.max(1, shown.bytesTotal);
      bar.value = shown.bytesDone;
      this.body.append(element('p', undefined, shown.title), bar, element('p', 'muted', `${formatBytes(shown.bytesDone)} of ${formatBytes(shown.bytesTotal)}`));
    } else if (shown.type === 'error') {
      const box = element('div', 'error');
      box.append(element('strong', undefined, shown.title), element('p', undefined, shown.message));
      this.body.append(box);
    } else if (shown.type === 'report') {
      draws = renderReport(this.body, shown.report, readTheme(), { table: this.state.tensors, filter: this.state.filter }, (view) => this.update({ tensors: view.table, filter: view.filter }, { keepHeader: true }));
    } else {
      draws = renderComparison(this.body, shown.comparison, readTheme(), this.state.diffs, (diffs) => this.update({ diffs }, { keepHeader: true }));
    }
    for (const draw of draws) draw();
  }
}

new CheckpointPage(vscodeApi<CheckpointWebviewMessage>());

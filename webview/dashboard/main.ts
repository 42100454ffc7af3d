// The dashboard webview: receives a snapshot then deltas from the host (validated), keeps UI state
// with setState, and shows one tab at a time so a 224-layer run never draws every chart at once.
// The same bundle serves the editor panel (full dashboard, single or compare layout) and the
// compact sidebar view (body data-layout="sidebar").
import './dashboard.css';
import { chipLabelEnds, chipLabels } from './model/chip-labels.js';
import { toCsv } from './model/csv.js';
import { assignColorSlots, restoreUiState, TABS, type Tab, type UiState } from './model/ui-state.js';
import type { GemmKind } from '../../src/protocol/config.js';
import type { Operand } from '../../src/protocol/telemetry.js';
import { tryCheck } from '../../src/protocol/validate.js';
import { alertFocus, hostToWebviewSchema, isEmptyDelta, type GridMetric, type HostToWebview, type RunInfo, type WebviewToHost } from '../../src/protocol/webview.js';
import { PendingRequests } from '../../src/shared/pending-requests.js';
import { button, checkbox, registerToolkit } from '../ui/toolkit.js';
import { vscodeApi, type VsCodeApi } from '../ui/vscode-api.js';
import { element, type Context, type View } from './context.js';
import { DashboardData, detailKey, gridKey } from './data.js';
import { composePng } from './export-png.js';
import { focusAt } from './focus-at.js';
import { onThemeChange, readTheme, type Theme } from './theme.js';
import { AlertsView, alertList } from './views/alerts.js';
import { CorrelationView } from './views/correlation.js';
import { LayerHeatmapView } from './views/layer-heatmap.js';
import { LossView } from './views/loss.js';
import { OverheadView } from './views/overhead.js';
import { OverviewView } from './views/overview.js';
import { RunsTableView } from './views/runs-table.js';
import { ScalesView } from './views/scales.js';

const TAB_LABELS: Record<Tab, string> = { loss: 'Loss', overhead: 'Token overhead', scales: 'Block scales', overview: 'Layer overview', layers: 'Layer heatmap', correlation: 'Wgrad error correlation', alerts: 'Alerts', runs: 'Runs' };
const VIEWS: Record<Tab, new (ctx: Context) => View> = { loss: LossView, overhead: OverheadView, scales: ScalesView, overview: OverviewView, layers: LayerHeatmapView, correlation: CorrelationView, alerts: AlertsView, runs: RunsTableView };

class Dashboard implements Context {
  readonly data = new DashboardData();
  state: UiState;
  theme: Theme = readTheme();
  private view: View | undefined;
  private readonly header = element('header', 'top');
  private readonly chips = element('div', 'run-chips');
  private readonly body = element('main', 'content');
  private readonly sidebar = document.body.dataset.layout === 'sidebar';
  /** Open requestLayer / requestLayerGrid requests, each with the key its reply is stored under. */
  private readonly requests = new PendingRequests<string>();
  private readonly requested = new Set<string>();
  /** The animation frame an update is queued for (0: none). */
  private updateFrame = 0;
  private hasSnapshot = false;

  constructor(private readonly vscode: VsCodeApi<WebviewToHost>) {
    this.state = restoreUiState(vscode.getState());
    document.body.append(this.header, this.body);
    this.body.append(element('p', 'note', 'Waiting for data from MX Scope…'));
    onThemeChange(() => {
      this.theme = readTheme();
      this.remount();
    });
    window.addEventListener('message', (event: MessageEvent) => this.receive(event.data));
    this.post({ type: 'ready' });
  }

  post(message: WebviewToHost): void {
    this.vscode.postMessage(message);
  }

  update(patch: Partial<UiState>, remount = false): void {
    const structural = remount || (patch.tab !== undefined && patch.tab !== this.state.tab) || (patch.mode !== undefined && patch.mode !== this.state.mode);
    this.state = { ...this.state, ...patch };
    this.vscode.setState(this.state);
    if (structural) this.remount();
    else this.scheduleUpdate();
  }

  detail(runId: string, layer: string, gemm: GemmKind, operand: Operand) {
    const key = detailKey(runId, layer, gemm, operand, this.state.lag);
    const cached = this.data.detail(key);
    if (cached || this.requested.has(key)) return cached;
    const requestId = this.requests.start(key);
    this.requested.add(key);
    this.post({ type: 'requestLayer', requestId, runId, layer, gemm, operand, lag: this.state.lag });
    return undefined;
  }

  grid(runId: string, metric: GridMetric, gemm: GemmKind) {
    const key = gridKey(runId, metric, gemm);
    const cached = this.data.grid(key);
    if (cached || this.requested.has(key)) return cached;
    const requestId = this.requests.start(key);
    this.requested.add(key);
    this.post({ type: 'requestLayerGrid', requestId, runId, metric, gemm });
    return undefined;
  }

  shownRuns(): RunInfo[] {
    const chosen = this.state.runIds.map((id) => this.data.run(id)).filter((run): run is RunInfo => run !== undefined);
    if (this.state.mode === 'compare') return chosen.length >= 2 ? chosen : this.data.runs.slice(-2);
    return chosen.length > 0 ? chosen : [...this.data.runs].reverse();
  }

  color(runId: string): string {
    return this.theme.palette[(this.state.colors[runId] ?? 0) % this.theme.palette.length]!;
  }

  /** Give new runs a colour slot and persist it (a reload keeps every run's colour). */
  private assignColors(): void {
    this.state = { ...this.state, colors: assignColorSlots(this.state.colors, this.data.runs.map((run) => run.runId)) };
    this.vscode.setState(this.state);
  }

  private receive(raw: unknown): void {
    const checked = tryCheck(hostToWebviewSchema, raw);
    if (!checked.ok) {
      console.error(`MX Scope dashboard: ignoring a malformed host message: ${checked.error.message}`);
      return;
    }
    const message: HostToWebview = checked.value;
    switch (message.type) {
      case 'snapshot':
        this.data.applySnapshot(message);
        this.assignColors();
        this.requested.clear();
        this.requests.clear();
        this.hasSnapshot = true;
        this.remount();
        break;
      case 'delta': {
        if (isEmptyDelta(message)) return;
        const changed = this.data.applyDelta(message);
        for (const key of [...this.requested]) if (changed.has(JSON.parse(key)[0])) this.requested.delete(key);
        if (message.runs.length > 0) this.renderChips();
        this.updateNow();
        break;
      }
      case 'layerGrid':
      case 'layerDetail': {
        const key = this.requests.settle(message.requestId);
        if (key === undefined) return;
        this.data.storeDetail(key, message);
        this.scheduleUpdate();
        break;
      }
      case 'focus':
        // Runs are compared at equal tokens (they may differ in tokens per step).
        this.update({ mode: message.mode, runIds: message.runIds, ...(message.mode === 'compare' ? { xAxis: 'tokens' as const } : {}), ...(message.at ? focusAt(message.at, this.state) : {}) }, true);
        break;
    }
  }

  /** Coalesces updates (a slider sends many per frame) into one, in the next animation frame. */
  private scheduleUpdate(): void {
    if (this.updateFrame !== 0 || !this.view) return;
    this.updateFrame = requestAnimationFrame(() => {
      this.updateFrame = 0;
      this.view?.update();
    });
  }

  /**
   * Deltas come at most every flush interval (250 ms), so one is drawn as it arrives: the drawing
   * overlaps the wait for the next frame, which then only presents it. Drawn in that frame's
   * animation callback instead, a step was painted a whole draw later.
   */
  private updateNow(): void {
    cancelAnimationFrame(this.updateFrame);
    this.updateFrame = 0;
    this.view?.update();
  }

  private remount(): void {
    if (!this.hasSnapshot) return;
    this.view?.destroy();
    this.view = undefined;
    this.body.replaceChildren();
    this.renderHeader();
    if (this.data.runs.length === 0) {
      this.body.append(element('p', 'note', 'No runs yet. Start an emulated run, connect to a trainer, or open a run log from the MX Scope Runs view; runs appear here as they stream.'));
      return;
    }
    if (this.sidebar) {
      this.mountSidebar();
      return;
    }
    this.view = new VIEWS[this.state.tab](this);
    this.body.append(this.view.root);
    this.view.update();
  }

  private mountSidebar(): void {
    const loss = new LossView(this, true);
    this.view = loss;
    // A side bar is short: the button first, then the chart, then the three newest alerts, one line each.
    const recent = this.data.alerts.slice(-3).reverse();
    // The side bar has no room for layer views: an alert opens the dashboard panel at it.
    const alerts = alertList(this, recent, (alert) => this.post({ type: 'openDashboard', focus: alertFocus(alert) }));
    alerts.classList.add('compact');
    this.body.append(button('Open Dashboard', () => this.post({ type: 'openDashboard' }), { primary: true }), loss.root, element('h3', undefined, 'Recent alerts'), alerts);
    loss.update();
  }

  /** Run chips: who is on screen, their colours and status. Rebuilt only when run info changes. */
  private renderChips(): void {
    const chips = this.chips;
    chips.replaceChildren();
    const shown = new Set(this.shownRuns().map((run) => run.runId));
    const labels = chipLabels(this.data.runs);
    for (const [i, run] of this.data.runs.entries()) {
      const on = shown.has(run.runId);
      // A real button: reachable with Tab, toggled with Enter or Space, its state announced.
      const chip = element('button', on ? 'run-chip on' : 'run-chip');
      chip.type = 'button';
      chip.setAttribute('aria-pressed', String(on));
      const swatch = element('span', 'swatch');
      swatch.style.borderColor = this.color(run.runId);
      const name = element('span', 'chip-name');
      const { head, last } = chipLabelEnds(labels[i]!);
      name.append(element('span', 'head', head), element('span', 'last', last));
      const status = run.status === 'running' ? ' ● live' : run.status === 'interrupted' ? ' · ended without runEnded' : ` · ${run.status}`;
      chip.append(swatch, name, element('span', `status ${run.status}`, status));
      // A screen reader hears the whole name, not the label cut to fit.
      chip.setAttribute('aria-label', `${run.name}${status}`);
      chip.title = `${run.name}\nfprop ${run.gemms.fprop} · dgrad ${run.gemms.dgrad} · wgrad ${run.gemms.wgrad}\nClick to ${on ? 'hide' : 'show'}`;
      chip.addEventListener('click', () => this.toggleRun(run.runId));
      chips.append(chip);
    }
  }

  private renderHeader(): void {
    this.renderChips();
    if (this.sidebar) {
      this.header.replaceChildren(this.chips);
      return;
    }
    const tabs = element('nav', 'tabs');
    for (const tab of TABS) {
      const tabButton = element('button', tab === this.state.tab ? 'tab selected' : 'tab', TAB_LABELS[tab]);
      tabButton.addEventListener('click', () => this.update({ tab }));
      tabs.append(tabButton);
    }
    const actions = element('div', 'actions');
    actions.append(
      checkbox('Compare runs', this.state.mode === 'compare', (on) => this.update({ mode: on ? 'compare' : 'single' }, true)),
      button('Export PNG', () => this.exportPng(), { title: 'Save the current chart as PNG' }),
      button('Export CSV', () => this.exportCsv(), { title: "Save the current chart's data as CSV" }),
    );
    this.header.replaceChildren(this.chips, actions, tabs);
  }

  private toggleRun(runId: string): void {
    const current = this.shownRuns().map((run) => run.runId);
    const next = current.includes(runId) ? current.filter((id) => id !== runId) : [...current, runId];
    if (next.length === 0) return;
    this.update({ runIds: next }, true);
  }

  private exportCsv(): void {
    if (!this.view) return;
    const { name, header, rows } = this.view.csv();
    this.post({ type: 'export', format: 'csv', fileName: name, data: toCsv(header, rows) });
  }

  private exportPng(): void {
    const view = this.view;
    if (!view) return;
    const detail = view.root.querySelector('.panel-title')?.textContent;
    const data = composePng(
      {
        title: `MX Scope — ${TAB_LABELS[this.state.tab]}${detail ? ` — ${detail}` : ''}`,
        runs: this.shownRuns().map((run) => ({ name: run.name, color: this.color(run.runId) })),
        chart: view.canvas(),
        root: view.root,
      },
      this.theme,
    );
    this.post({ type: 'export', format: 'png', fileName: `${this.state.tab}.png`, data });
  }

}

registerToolkit();
new Dashboard(vscodeApi<WebviewToHost>());

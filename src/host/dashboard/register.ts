// Wires the dashboard into the extension: the alert tracker (it must see every record from
// activation on), the feed both webviews read, the Open Dashboard and Compare Runs commands, the
// panel serializer and the sidebar view.
import * as vscode from 'vscode';
import { AlertTracker } from '../../dashboard/alerts.js';
import { DashboardFeed } from '../../dashboard/feed.js';
import { NoticeFilter, type Notice } from '../../dashboard/notice.js';
import { statusText } from '../model/run-tree.js';
import { runIdOf } from '../runs-view.js';
import type { HostServices } from '../services.js';
import { DASHBOARD_VIEW_TYPE, DashboardPanels } from './panel.js';
import { DashboardSidebar, SIDEBAR_VIEW_ID } from './sidebar.js';

export function registerDashboard(context: vscode.ExtensionContext, services: HostServices): void {
  const alerts = new AlertTracker();
  const feed = new DashboardFeed(services.store, alerts);
  const panels = new DashboardPanels(context.extensionUri, feed, services);
  const open = () => panels.open();

  const notices = new NoticeFilter();
  context.subscriptions.push(
    services.store.onDidChange((change) => {
      if (!change.record) return;
      if (change.record.type === 'runStarted') notices.reset(change.runId);
      const raised = alerts.ingest(change.record);
      const run = services.store.get(change.runId)?.summary;
      // Runs read from a log are history: only a live run's event interrupts the user.
      if (run?.source === 'live') for (const alert of raised) notify(notices.notice(alert, run.name), panels);
    }),
    panels,
    vscode.commands.registerCommand('mxscope.openDashboard', open),
    vscode.commands.registerCommand('mxscope.compareRuns', (node?: unknown, nodes?: unknown[]) => compareRuns(services, panels, [node, ...(nodes ?? [])])),
    vscode.window.registerWebviewPanelSerializer(DASHBOARD_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel) => panels.attach(panel),
    }),
    vscode.window.registerWebviewViewProvider(SIDEBAR_VIEW_ID, new DashboardSidebar(context.extensionUri, feed, services, (focus) => panels.open(focus))),
  );
}

function notify(notice: Notice | null, panels: DashboardPanels): void {
  if (!notice) return;
  const show = notice.severity === 'error' ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
  const showButton = vscode.l10n.t('Show in Dashboard');
  const checkpointButton = vscode.l10n.t('Start Next Run from Checkpoint…');
  const buttons = notice.checkpoint === undefined ? [showButton] : [showButton, checkpointButton];
  void show(notice.message, ...buttons).then((choice) => {
    if (choice === showButton) panels.open(notice.focus);
    if (choice === checkpointButton && notice.checkpoint !== undefined) {
      void vscode.commands.executeCommand('mxscope.startFromCheckpoint', vscode.Uri.file(notice.checkpoint));
    }
  });
}

/** Runs picked in the Runs view (multi-select), else chosen in a quick pick; two or more. */
async function compareRuns(services: HostServices, panels: DashboardPanels, nodes: unknown[]): Promise<void> {
  const fromView = [...new Set(nodes.map(runIdOf).filter((id): id is string => id !== undefined))];
  let runIds = fromView;
  if (runIds.length < 2) {
    const runs = services.store.list();
    if (runs.length < 2) {
      void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: Compare Runs needs at least two runs. Start one or open a run log first.'));
      return;
    }
    const picked = await vscode.window.showQuickPick(
      runs.slice().reverse().map((run) => ({ label: run.name, description: statusText(run.status), detail: run.runId, runId: run.runId, picked: fromView.includes(run.runId) })),
      { canPickMany: true, title: vscode.l10n.t('Compare Runs: pick two or more'), placeHolder: vscode.l10n.t('Runs to show side by side') },
    );
    if (!picked) return;
    if (picked.length < 2) {
      void vscode.window.showWarningMessage(vscode.l10n.t('MX Scope: pick at least two runs to compare.'));
      return;
    }
    runIds = picked.map((item) => item.runId);
  }
  panels.open({ type: 'focus', mode: 'compare', runIds: runIds.slice(0, 16) });
}

// The dashboard editor panel: one at a time, revealed if open, restored after a window reload by
// the serializer (its UI state comes back through the webview's own getState).
import * as vscode from 'vscode';
import type { FocusMessage } from '../../protocol/webview.js';
import type { DashboardFeed } from '../../dashboard/feed.js';
import type { HostServices } from '../services.js';
import { configureWebview, DashboardConnection } from './connection.js';

export const DASHBOARD_VIEW_TYPE = 'mxscope.dashboard';

export class DashboardPanels implements vscode.Disposable {
  private current: { panel: vscode.WebviewPanel; connection: DashboardConnection } | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly feed: DashboardFeed,
    private readonly services: HostServices,
  ) {}

  /** Open (or reveal) the dashboard, optionally showing runs in a mode. */
  open(focus?: FocusMessage): void {
    if (this.current) this.current.panel.reveal(undefined, false);
    else this.attach(vscode.window.createWebviewPanel(DASHBOARD_VIEW_TYPE, 'MX Scope', vscode.ViewColumn.Active, { enableScripts: true }));
    if (focus) this.current!.connection.focus(focus);
  }

  /** Adopt a panel VS Code restored after a reload. */
  attach(panel: vscode.WebviewPanel): void {
    this.current?.panel.dispose();
    panel.iconPath = vscode.Uri.joinPath(this.extensionUri, 'media', 'mxscope.svg');
    configureWebview(panel.webview, this.extensionUri, 'panel');
    const connection = new DashboardConnection(panel, this.feed, this.services, () => this.open(), panel.onDidChangeViewState);
    this.current = { panel, connection };
    panel.onDidDispose(() => {
      connection.dispose();
      if (this.current?.panel === panel) this.current = undefined;
    });
  }

  dispose(): void {
    this.current?.panel.dispose();
  }
}

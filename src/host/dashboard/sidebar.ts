// The compact dashboard in the MX Scope activity-bar container: loss of every run, recent alerts and
// a button that opens the full dashboard. Same bundle as the panel, sidebar layout.
import * as vscode from 'vscode';
import type { DashboardFeed } from '../../dashboard/feed.js';
import type { FocusMessage } from '../../protocol/webview.js';
import type { HostServices } from '../services.js';
import { configureWebview, DashboardConnection } from './connection.js';

export const SIDEBAR_VIEW_ID = 'mxscope.dashboardSidebar';

export class DashboardSidebar implements vscode.WebviewViewProvider {
  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly feed: DashboardFeed,
    private readonly services: HostServices,
    private readonly openDashboard: (focus?: FocusMessage) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    configureWebview(view.webview, this.extensionUri, 'sidebar');
    const connection = new DashboardConnection(view, this.feed, this.services, this.openDashboard, view.onDidChangeVisibility);
    view.onDidDispose(() => connection.dispose());
  }
}

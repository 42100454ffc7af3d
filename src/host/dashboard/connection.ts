// Attaches one dashboard webview (panel or sidebar) to the run store through a DashboardSession,
// and does what needs VS Code: the page's HTML and resource roots, and exports via a save dialog.
import * as vscode from 'vscode';
import type { ExportMessage, FocusMessage } from '../../protocol/webview.js';
import type { DashboardFeed } from '../../dashboard/feed.js';
import { DashboardSession } from '../../dashboard/session.js';
import type { HostServices } from '../services.js';
import { dashboardHtml } from './html.js';

export interface WebviewHost {
  readonly webview: vscode.Webview;
  readonly visible: boolean;
}

export function configureWebview(webview: vscode.Webview, extensionUri: vscode.Uri, layout: 'panel' | 'sidebar'): void {
  const dist = vscode.Uri.joinPath(extensionUri, 'dist');
  webview.options = { enableScripts: true, localResourceRoots: [dist, vscode.Uri.joinPath(extensionUri, 'media')] };
  webview.html = dashboardHtml({
    cspSource: webview.cspSource,
    scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview', 'dashboard.js')).toString(),
    styleUri: webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview', 'dashboard.css')).toString(),
    layout,
  });
}

export class DashboardConnection implements vscode.Disposable {
  private readonly session: DashboardSession;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(host: WebviewHost, feed: DashboardFeed, services: HostServices, openDashboard: (focus?: FocusMessage) => void, onDidChangeVisibility: vscode.Event<unknown>) {
    this.session = new DashboardSession(feed, {
      post: (message) => void host.webview.postMessage(message),
      visible: () => host.visible,
      log: services.log,
      exportFile: (message) =>
        void exportFile(message, services).catch((error: Error) => {
          services.log(`dashboard: export of ${message.fileName} failed: ${error.message}`);
          void vscode.window.showErrorMessage(vscode.l10n.t('MX Scope: could not save {0}: {1}', message.fileName, error.message));
        }),
      openDashboard,
    });
    this.disposables.push(
      host.webview.onDidReceiveMessage((raw) => this.session.receive(raw)),
      services.store.onDidChange(() => this.session.storeChanged()),
      onDidChangeVisibility(() => this.session.visibilityChanged()),
    );
  }

  focus(message: FocusMessage): void {
    this.session.focus(message);
  }

  dispose(): void {
    this.session.dispose();
    for (const disposable of this.disposables) disposable.dispose();
  }
}

async function exportFile(message: ExportMessage, services: HostServices): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const target = await vscode.window.showSaveDialog({
    defaultUri: folder ? vscode.Uri.joinPath(folder, message.fileName) : undefined,
    filters: message.format === 'png' ? { [vscode.l10n.t('PNG image')]: ['png'] } : { [vscode.l10n.t('CSV')]: ['csv'] },
    saveLabel: vscode.l10n.t('Export'),
  });
  if (!target) return;
  const bytes = message.format === 'png' ? Buffer.from(message.data.replace(/^data:image\/png;base64,/, ''), 'base64') : Buffer.from(message.data, 'utf8');
  await vscode.workspace.fs.writeFile(target, bytes);
  services.log(`dashboard: exported ${message.fileName} to ${target.fsPath}`);
  // Say where it went, with a way there.
  const open = vscode.l10n.t('Open');
  const reveal = vscode.l10n.t('Reveal in File Explorer');
  const choice = await vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: saved {0} to {1}', message.format.toUpperCase(), target.fsPath), open, reveal);
  if (choice === open) await vscode.commands.executeCommand('vscode.open', target);
  else if (choice === reveal) await vscode.commands.executeCommand('revealFileInOS', target);
}

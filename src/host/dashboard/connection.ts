// One dashboard webview (panel or sidebar) attached to the run store: answers `ready` with a
// snapshot, sends deltas at most every FLUSH_MS while visible, nothing while hidden, and a fresh
// snapshot when it is shown again. Incoming messages are validated before anything acts on them.
import * as vscode from 'vscode';
import { tryCheck } from '../../protocol/validate.js';
import { isEmptyDelta, webviewToHostSchema, type ExportMessage, type FocusMessage, type HostToWebview } from '../../protocol/webview.js';
import type { DashboardFeed, FeedCursor } from '../../dashboard/feed.js';
import type { HostServices } from '../services.js';
import { dashboardHtml } from './html.js';

const FLUSH_MS = 250;
/** A webview shown again normally reloads and says `ready`; one that kept its page gets a snapshot after this. */
const RESYNC_MS = 1000;

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
  private cursor: FeedCursor | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private wasVisible: boolean;
  private pendingFocus: FocusMessage | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly host: WebviewHost,
    private readonly feed: DashboardFeed,
    private readonly services: HostServices,
    private readonly openDashboard: () => void,
    onDidChangeVisibility: vscode.Event<unknown>,
  ) {
    this.wasVisible = host.visible;
    this.disposables.push(
      host.webview.onDidReceiveMessage((raw) => this.receive(raw)),
      services.store.onDidChange(() => this.scheduleFlush()),
      onDidChangeVisibility(() => {
        // Hidden: send nothing and forget what it has (VS Code tears the page down); shown: resync.
        if (host.visible === this.wasVisible) return; // e.g. only the active editor changed
        this.wasVisible = host.visible;
        clearTimeout(this.resyncTimer);
        if (!host.visible) this.cursor = undefined;
        else this.resyncTimer = setTimeout(() => this.cursor || this.sendSnapshot(), RESYNC_MS);
      }),
    );
  }

  /** Show runs in the given mode once the webview is ready. */
  focus(message: FocusMessage): void {
    if (this.cursor) void this.post(message);
    else this.pendingFocus = message;
  }

  dispose(): void {
    clearTimeout(this.flushTimer);
    clearTimeout(this.resyncTimer);
    for (const disposable of this.disposables) disposable.dispose();
  }

  private receive(raw: unknown): void {
    const checked = tryCheck(webviewToHostSchema, raw);
    if (!checked.ok) {
      this.services.log(`dashboard: ignored a malformed webview message: ${checked.error.message}`);
      return;
    }
    const message = checked.value;
    switch (message.type) {
      case 'ready':
        clearTimeout(this.resyncTimer);
        this.sendSnapshot();
        break;
      case 'requestLayer': {
        const detail = this.feed.layerDetail(message);
        if (detail) void this.post(detail);
        break;
      }
      case 'export':
        void this.export(message);
        break;
      case 'openDashboard':
        this.openDashboard();
        break;
    }
  }

  private sendSnapshot(): void {
    if (!this.host.visible) return;
    const { message, cursor } = this.feed.snapshot();
    this.cursor = cursor;
    void this.post(message);
    if (this.pendingFocus) {
      void this.post(this.pendingFocus);
      this.pendingFocus = undefined;
    }
  }

  private scheduleFlush(): void {
    if (this.flushTimer || !this.cursor || !this.host.visible) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      if (!this.cursor || !this.host.visible) return;
      const delta = this.feed.delta(this.cursor);
      if (delta === null) this.sendSnapshot();
      else if (!isEmptyDelta(delta)) void this.post(delta);
    }, FLUSH_MS);
  }

  private post(message: HostToWebview): Thenable<boolean> {
    return this.host.webview.postMessage(message);
  }

  private async export(message: ExportMessage): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const target = await vscode.window.showSaveDialog({
      defaultUri: folder ? vscode.Uri.joinPath(folder, message.fileName) : undefined,
      filters: message.format === 'png' ? { 'PNG image': ['png'] } : { CSV: ['csv'] },
      saveLabel: 'Export',
    });
    if (!target) return;
    const bytes = message.format === 'png' ? Buffer.from(message.data.replace(/^data:image\/png;base64,/, ''), 'base64') : Buffer.from(message.data, 'utf8');
    await vscode.workspace.fs.writeFile(target, bytes);
    this.services.log(`dashboard: exported ${message.fileName} to ${target.fsPath}`);
  }
}

// One dashboard webview's conversation with the host, free of `vscode` so it is tested in Node:
// `ready` is answered with a snapshot, store changes become deltas at most every flushMs while the
// webview is visible, nothing is sent while it is hidden, and it is resynced when shown again.
import { tryCheck } from '../protocol/validate.js';
import { isEmptyDelta, webviewToHostSchema, type ExportMessage, type FocusMessage, type HostToWebview } from '../protocol/webview.js';
import type { DashboardFeed, FeedCursor } from './feed.js';

export interface SessionPort {
  post(message: HostToWebview): void;
  visible(): boolean;
  log(line: string): void;
  exportFile(message: ExportMessage): void;
  /** Open the dashboard panel, at `focus` when given (a sidebar alert). */
  openDashboard(focus?: FocusMessage): void;
}

export interface SessionTiming {
  /** Deltas are batched over this long. */
  flushMs: number;
  /** A webview shown again normally reloads and says `ready`; one that kept its page gets a snapshot after this. */
  resyncMs: number;
}

export const DEFAULT_SESSION_TIMING: SessionTiming = { flushMs: 250, resyncMs: 1000 };

export class DashboardSession {
  private cursor: FeedCursor | undefined;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private resyncTimer: ReturnType<typeof setTimeout> | undefined;
  private pendingFocus: FocusMessage | undefined;
  private wasVisible: boolean;

  constructor(
    private readonly feed: Pick<DashboardFeed, 'snapshot' | 'delta' | 'layerDetail' | 'layerGrid'>,
    private readonly port: SessionPort,
    private readonly timing: SessionTiming = DEFAULT_SESSION_TIMING,
  ) {
    this.wasVisible = port.visible();
  }

  /** A message from the webview: validated, then acted on. */
  receive(raw: unknown): void {
    const checked = tryCheck(webviewToHostSchema, raw);
    if (!checked.ok) {
      this.port.log(`dashboard: ignored a malformed webview message: ${checked.error.message}`);
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
        if (detail) this.port.post(detail);
        break;
      }
      case 'requestLayerGrid': {
        const grid = this.feed.layerGrid(message);
        if (grid) this.port.post(grid);
        break;
      }
      case 'export':
        this.port.exportFile(message);
        break;
      case 'openDashboard':
        this.port.openDashboard(message.focus);
        break;
    }
  }

  /** The run store changed: send a delta soon, if the webview is visible and synced. */
  storeChanged(): void {
    if (this.flushTimer || !this.cursor || !this.port.visible()) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      if (!this.cursor || !this.port.visible()) return;
      const delta = this.feed.delta(this.cursor);
      if (delta === null) this.sendSnapshot();
      else if (!isEmptyDelta(delta)) this.port.post(delta);
    }, this.timing.flushMs);
  }

  visibilityChanged(): void {
    const visible = this.port.visible();
    if (visible === this.wasVisible) return; // e.g. only the active editor changed
    this.wasVisible = visible;
    clearTimeout(this.resyncTimer);
    // Hidden: send nothing and forget what it has (VS Code tears the page down).
    if (!visible) this.cursor = undefined;
    else this.resyncTimer = setTimeout(() => this.cursor || this.sendSnapshot(), this.timing.resyncMs);
  }

  /** Show runs in a mode, now if the webview is synced, else right after its snapshot. */
  focus(message: FocusMessage): void {
    if (this.cursor) this.port.post(message);
    else this.pendingFocus = message;
  }

  dispose(): void {
    clearTimeout(this.flushTimer);
    clearTimeout(this.resyncTimer);
  }

  private sendSnapshot(): void {
    if (!this.port.visible()) return;
    const { message, cursor } = this.feed.snapshot();
    this.cursor = cursor;
    this.port.post(message);
    if (this.pendingFocus) {
      this.port.post(this.pendingFocus);
      this.pendingFocus = undefined;
    }
  }
}

// The status bar item: connection state, run, step, loss and GEMM recipe; click → quick actions.
import * as vscode from 'vscode';
import type { LiveLink } from '../live/live-link.js';
import { statusText } from './model/status-text.js';

export function createStatusBar(link: LiveLink): vscode.Disposable {
  const item = vscode.window.createStatusBarItem('mxscope.status', vscode.StatusBarAlignment.Left, 50);
  item.name = 'MX Scope';
  item.command = 'mxscope.quickActions';
  let scheduled: NodeJS.Timeout | undefined;
  const update = () => {
    scheduled = undefined;
    const { text, tooltip } = statusText(link.snapshot());
    item.text = text;
    item.tooltip = tooltip;
  };
  // Steps can arrive hundreds of times a second; a few repaints a second is plenty.
  const subscription = link.onDidChange(() => (scheduled ??= setTimeout(update, 200)));
  update();
  item.show();
  return new vscode.Disposable(() => {
    clearTimeout(scheduled);
    subscription.dispose();
    item.dispose();
  });
}

// Brings back, after a window reload, the runs the window held before it (their run logs), and
// keeps the list up to date in workspaceState from then on.
import type * as vscode from 'vscode';
import { rememberRunLogs, restoreRunLogs } from '../store/run-memory.js';
import type { HostServices } from './services.js';

const RUN_LOGS_KEY = 'mxscope.runLogs';

export async function restoreAndRememberRuns(context: vscode.ExtensionContext, services: HostServices): Promise<void> {
  const stored: unknown = context.workspaceState.get(RUN_LOGS_KEY);
  const dirs = Array.isArray(stored) ? stored.filter((dir): dir is string => typeof dir === 'string') : [];
  if (dirs.length > 0) {
    const restored = await restoreRunLogs(services.store, dirs, services.log);
    services.log(`restored ${restored} of ${dirs.length} runs the window held before it reloaded`);
  }
  // Remembering starts after the restore, so a reload during it does not forget the runs not yet read.
  context.subscriptions.push(rememberRunLogs(services.store, (list) => void context.workspaceState.update(RUN_LOGS_KEY, list)));
}

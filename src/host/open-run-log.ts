// "Open Run Log": read a run-log directory (or a folder of them) into the store, with a progress
// notification.
import * as vscode from 'vscode';
import { TELEMETRY_NDJSON } from '../runlog/index.js';
import { loadRunLog, runLogDirs } from '../store/load-run-log.js';
import type { HostServices } from './services.js';

export async function openRunLog(services: HostServices, target?: vscode.Uri): Promise<void> {
  const folder = target ?? (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: vscode.l10n.t('Open Run Log'), title: vscode.l10n.t('A run directory (with run.json and telemetry.ndjson)') }))?.[0];
  if (!folder) return;
  const picked = folder.fsPath;
  await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: vscode.l10n.t('MX Scope: opening {0}', picked), cancellable: false }, async (progress) => {
    try {
      const dirs = runLogDirs(picked);
      if (dirs.length === 0) throw new Error(vscode.l10n.t('neither it nor its sub-folders contain {0}', TELEMETRY_NDJSON));
      for (const [index, dir] of dirs.entries()) {
        const of = dirs.length > 1 ? vscode.l10n.t('run {0} of {1}: ', index + 1, dirs.length) : '';
        progress.report({ message: of + vscode.l10n.t('reading'), increment: 100 / dirs.length });
        const summary = await loadRunLog(services.store, dir, (count) => progress.report({ message: of + vscode.l10n.t('{0} records', count) }));
        for (const warning of summary.warnings) services.log(warning);
        const warned = summary.warnings.length > 0 ? ` (${summary.warnings.length} lines skipped: see the MX Scope output)` : '';
        services.log(`opened ${dir}: ${summary.records} records${warned}`);
        if (summary.records === 0) void vscode.window.showWarningMessage(vscode.l10n.t('MX Scope: {0} has no telemetry records{1}.', dir, warned));
      }
    } catch (error) {
      const message = vscode.l10n.t('MX Scope: could not open {0} as a run log: {1}. Pick a run directory (with {2}) or a folder of them.', picked, (error as Error).message, TELEMETRY_NDJSON);
      services.log(message);
      void vscode.window.showErrorMessage(message);
    }
  });
}

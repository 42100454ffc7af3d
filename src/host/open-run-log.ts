// "Open Run Log": read a run-log directory (or a folder of them) into the store, with a progress
// notification.
import * as vscode from 'vscode';
import { TELEMETRY_NDJSON } from '../runlog/index.js';
import { loadRunLog, runLogDirs } from '../store/load-run-log.js';
import type { HostServices } from './services.js';

export async function openRunLog(services: HostServices, target?: vscode.Uri): Promise<void> {
  const folder = target ?? (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Open Run Log', title: 'A run directory (with run.json and telemetry.ndjson)' }))?.[0];
  if (!folder) return;
  const picked = folder.fsPath;
  await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `MX Scope: opening ${picked}`, cancellable: false }, async (progress) => {
    try {
      const dirs = runLogDirs(picked);
      if (dirs.length === 0) throw new Error(`neither it nor its sub-folders contain ${TELEMETRY_NDJSON}`);
      for (const [index, dir] of dirs.entries()) {
        const of = dirs.length > 1 ? `run ${index + 1} of ${dirs.length}: ` : '';
        progress.report({ message: `${of}reading`, increment: 100 / dirs.length });
        const summary = await loadRunLog(services.store, dir, (count) => progress.report({ message: `${of}${count} records` }));
        for (const warning of summary.warnings) services.log(warning);
        const warned = summary.warnings.length > 0 ? ` (${summary.warnings.length} lines skipped: see the MX Scope output)` : '';
        services.log(`opened ${dir}: ${summary.records} records${warned}`);
        if (summary.records === 0) void vscode.window.showWarningMessage(`MX Scope: ${dir} has no telemetry records${warned}.`);
      }
    } catch (error) {
      const message = `MX Scope: could not open ${picked} as a run log: ${(error as Error).message}. Pick a run directory (with ${TELEMETRY_NDJSON}) or a folder of them.`;
      services.log(message);
      void vscode.window.showErrorMessage(message);
    }
  });
}

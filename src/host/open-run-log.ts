// "Open Run Log": read a run-log directory into the store, with a progress notification.
import * as vscode from 'vscode';
import { readRunLogLines } from '../runlog/index.js';
import type { HostServices } from './services.js';

export async function openRunLog(services: HostServices, target?: vscode.Uri): Promise<void> {
  const folder = target ?? (await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, openLabel: 'Open Run Log', title: 'A run directory (with run.json and telemetry.ndjson)' }))?.[0];
  if (!folder) return;
  const dir = folder.fsPath;
  await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `MX Scope: opening ${dir}`, cancellable: false }, async (progress) => {
    let count = 0;
    try {
      const summary = await readRunLogLines(dir, (record) => {
        services.store.ingest(record, 'loaded', dir);
        if (++count % 5000 === 0) progress.report({ message: `${count} records` });
      });
      services.store.markOrphaned('loaded');
      for (const warning of summary.warnings) services.log(warning);
      const warned = summary.warnings.length > 0 ? ` (${summary.warnings.length} lines skipped: see the MX Scope output)` : '';
      services.log(`opened ${dir}: ${summary.records} records${warned}`);
      if (summary.records === 0) void vscode.window.showWarningMessage(`MX Scope: ${dir} has no telemetry records${warned}.`);
    } catch (error) {
      const message = `MX Scope: could not open ${dir} as a run log: ${(error as Error).message}. Pick a run directory that contains telemetry.ndjson.`;
      services.log(message);
      void vscode.window.showErrorMessage(message);
    }
  });
}

// "MX Scope: Compare Checkpoints": from two files selected in the explorer, one file plus a picked
// second, or two picked files; the comparison opens in a panel beside the editor.
import * as vscode from 'vscode';
import { basename } from 'node:path';
import { distinctNames } from '../model/distinct-names.js';
import { attachCheckpointWebview } from './webview.js';

export const COMPARE_VIEW_TYPE = 'mxscope.checkpointCompare';

async function pickCheckpoint(title: string): Promise<vscode.Uri | undefined> {
  const picked = await vscode.window.showOpenDialog({
    title,
    canSelectMany: false,
    openLabel: vscode.l10n.t('Select checkpoint'),
    filters: { [vscode.l10n.t('Checkpoints (.safetensors, .safetensors.index.json)')]: ['safetensors', 'json'] },
  });
  return picked?.[0];
}

/** `clicked` and `selected` are what the explorer context menu passes (the clicked file, every selected file). */
export async function compareCheckpointsCommand(extensionUri: vscode.Uri, log: (line: string) => void, clicked?: unknown, selected?: unknown): Promise<void> {
  const uris = (Array.isArray(selected) ? selected : [clicked]).filter((uri): uri is vscode.Uri => uri instanceof vscode.Uri);
  const first = uris[0] ?? (await pickCheckpoint(vscode.l10n.t('Compare checkpoints: first checkpoint (A)')));
  if (!first) return;
  const second = uris[1] ?? (await pickCheckpoint(vscode.l10n.t('Compare {0} (A) with… (B)', basename(first.path))));
  if (!second) return;
  for (const uri of [first, second]) {
    if (uri.scheme !== 'file') throw new Error(vscode.l10n.t('{0} is not a local file: MX Scope reads checkpoints from disk', uri.toString()));
  }
  const [nameA, nameB] = distinctNames(first.path, second.path);
  const title = `${nameA} ↔ ${nameB}`;
  const panel = vscode.window.createWebviewPanel(COMPARE_VIEW_TYPE, title, vscode.ViewColumn.Active, { enableScripts: true });
  const attached = attachCheckpointWebview(panel.webview, extensionUri, title, { kind: 'compare', pathA: first.fsPath, pathB: second.fsPath }, log);
  panel.onDidDispose(() => attached.dispose());
}

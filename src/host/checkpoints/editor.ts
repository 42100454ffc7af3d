// The read-only custom editor for *.safetensors (and, via "Open With…", *.safetensors.index.json):
// the checkpoint's tensors with their MXFP4 analysis. Errors (a hostile or truncated file) show in
// the page; nothing is thrown into VS Code.
import * as vscode from 'vscode';
import { basename } from 'node:path';
import { attachCheckpointWebview } from './webview.js';

export const CHECKPOINT_VIEW_TYPE = 'mxscope.checkpoint';
/** The same editor for `*.safetensors.index.json`, offered under "Open With…" so JSON still opens as text. */
export const CHECKPOINT_INDEX_VIEW_TYPE = 'mxscope.checkpointIndex';

export class CheckpointEditorProvider implements vscode.CustomReadonlyEditorProvider {
  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly log: (line: string) => void,
  ) {}

  openCustomDocument(uri: vscode.Uri): vscode.CustomDocument {
    return { uri, dispose: () => undefined };
  }

  resolveCustomEditor(document: vscode.CustomDocument, panel: vscode.WebviewPanel): void {
    const { uri } = document;
    // Checkpoints are read through Node file handles: a remote or virtual file has no local path.
    const target = uri.scheme === 'file' ? { kind: 'analyse' as const, path: uri.fsPath } : { kind: 'unavailable' as const, reason: vscode.l10n.t('{0} is not a local file: MX Scope reads checkpoints from disk', uri.toString()) };
    const attached = attachCheckpointWebview(panel.webview, this.extensionUri, basename(uri.path), target, this.log);
    panel.onDidDispose(() => attached.dispose());
  }
}

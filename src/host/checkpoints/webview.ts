// Wires a webview (custom editor or compare panel) to a CheckpointSession: options, page, messages.
import * as vscode from 'vscode';
import type { CheckpointHostMessage } from '../../protocol/checkpoint-webview.js';
import { webviewHtml } from '../dashboard/html.js';
import { CheckpointSession, type SessionTarget } from '../../checkpoint/session.js';

export function attachCheckpointWebview(webview: vscode.Webview, extensionUri: vscode.Uri, title: string, target: SessionTarget, log: (line: string) => void): vscode.Disposable {
  const bundles = vscode.Uri.joinPath(extensionUri, 'dist', 'webview');
  webview.options = { enableScripts: true, localResourceRoots: [bundles] };
  const session = new CheckpointSession(target, (message: CheckpointHostMessage) => void webview.postMessage(message), log);
  const listener = webview.onDidReceiveMessage((message: unknown) => session.onMessage(message));
  webview.html = webviewHtml({
    cspSource: webview.cspSource,
    scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(bundles, 'checkpoint.js')).toString(),
    styleUri: webview.asWebviewUri(vscode.Uri.joinPath(bundles, 'checkpoint.css')).toString(),
    title,
  });
  return vscode.Disposable.from(listener, { dispose: () => session.dispose() });
}

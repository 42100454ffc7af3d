// The checkpoint part of the extension: the read-only safetensors editor and Compare Checkpoints.
import * as vscode from 'vscode';
import type { HostServices } from '../services.js';
import { compareCheckpointsCommand } from './compare.js';
import { CHECKPOINT_INDEX_VIEW_TYPE, CHECKPOINT_VIEW_TYPE, CheckpointEditorProvider } from './editor.js';

export function registerCheckpoints(context: vscode.ExtensionContext, services: HostServices): void {
  const log = (line: string) => services.log(line);
  const editor = new CheckpointEditorProvider(context.extensionUri, log);
  context.subscriptions.push(
    vscode.window.registerCustomEditorProvider(CHECKPOINT_VIEW_TYPE, editor, { supportsMultipleEditorsPerDocument: true }),
    vscode.window.registerCustomEditorProvider(CHECKPOINT_INDEX_VIEW_TYPE, editor, { supportsMultipleEditorsPerDocument: true }),
    vscode.commands.registerCommand('mxscope.compareCheckpoints', async (clicked?: unknown, selected?: unknown) => {
      try {
        await compareCheckpointsCommand(context.extensionUri, log, clicked, selected);
      } catch (error) {
        log(`Compare Checkpoints failed: ${(error as Error).message}`);
        void vscode.window.showErrorMessage(vscode.l10n.t('MX Scope: {0}', (error as Error).message));
      }
    }),
  );
}

// MX Scope's extension host entry: builds the shared services (run store, output channel, live
// link), registers commands, the status bar and the Runs view, and hands the services to the
// dashboard and checkpoint parts. The only code that imports `vscode` lives under src/host/.
import * as vscode from 'vscode';
import { setMxBackend } from '../mx/backend.js';
import { stopSampleWorkers } from '../checkpoint/sqnr-workers.js';
import { RunStore } from '../store/run-store.js';
import { registerCheckpoints } from './checkpoints/register.js';
import { registerDashboard } from './dashboard/register.js';
import { connectToTrainer, disconnect, showQuickActions, startEmulatedRun } from './commands/connection.js';
import { useTranslator } from './model/localize.js';
import { userMessage } from './model/user-message.js';
import { saveCheckpoint, setGemmPrecision, setScaleRule, setStatsCoverage, startFromCheckpoint, startNextRun, stopRun, switchRotationMode } from './commands/next-run.js';
import { emulationConfig } from '../trainer/emulation-config.js';
import { EmulationTrainer } from './emulation.js';
import { LiveLink } from '../live/live-link.js';
import { openRunLog } from './open-run-log.js';
import { restoreAndRememberRuns } from './remember-runs.js';
import { createRunsView, runIdOf } from './runs-view.js';
import type { HostServices } from './services.js';
import { readSettings } from './settings.js';
import { createStatusBar } from './status-bar.js';

let emulation: EmulationTrainer | undefined;

export function activate(context: vscode.ExtensionContext): HostServices {
  // First: the view models (status bar, Runs view, quick picks) word their text through it.
  useTranslator(vscode.l10n.t);
  // The host's one kernel selection, for the checkpoint editor's analysis (src/mx selects nothing on import).
  setMxBackend('auto');
  const output = vscode.window.createOutputChannel('MX Scope');
  const log = (line: string) => output.appendLine(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
  const settings = readSettings();
  const store = new RunStore(settings.history);
  const link = new LiveLink(store, log, emulationConfig(settings));
  const services: HostServices = { store, output, link, settings: readSettings, log };
  // A crashed emulation trainer will not come back: stop reconnecting to it.
  emulation = new EmulationTrainer(context, log, (url) => {
    if (link.activeUrl === url) link.disconnect();
    void vscode.window.showErrorMessage(vscode.l10n.t('MX Scope: the emulation trainer exited unexpectedly; see the MX Scope output for its last messages.'));
  });
  const trainer = emulation;

  const command = (id: string, run: (...args: unknown[]) => Promise<void> | void) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        await run(...args);
      } catch (error) {
        log(`${id} failed: ${(error as Error).message}`);
        void vscode.window.showErrorMessage(vscode.l10n.t('MX Scope: {0}', userMessage(error)));
      }
    });

  context.subscriptions.push(
    output,
    trainer,
    { dispose: () => link.disconnect() },
    link.onDidRefuseChange((reason) =>
      void vscode.window.showWarningMessage(vscode.l10n.t('MX Scope: the trainer refused the next-run change made while it was not connected, so it was dropped: {0}', reason))),
    createStatusBar(link),
    createRunsView(store),
    command('mxscope.startEmulatedRun', () => startEmulatedRun(services, trainer)),
    command('mxscope.connect', () => connectToTrainer(services, context)),
    command('mxscope.disconnect', () => disconnect(services, trainer)),
    command('mxscope.switchRotationMode', () => switchRotationMode(services, context)),
    command('mxscope.setGemmPrecision', () => setGemmPrecision(services)),
    command('mxscope.setScaleRule', () => setScaleRule(services)),
    command('mxscope.setStatsCoverage', () => setStatsCoverage(services)),
    command('mxscope.startNextRun', () => startNextRun(services)),
    command('mxscope.startFromCheckpoint', (target) => startFromCheckpoint(services, target instanceof vscode.Uri ? target : undefined)),
    command('mxscope.stopRun', () => stopRun(services)),
    command('mxscope.saveCheckpoint', () => saveCheckpoint(services)),
    command('mxscope.openRunLog', (target) => openRunLog(services, target instanceof vscode.Uri ? target : undefined)),
    command('mxscope.removeRun', (node) => void store.remove(runIdOf(node) ?? '')),
    command('mxscope.quickActions', () => showQuickActions(services)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('mxscope.emulation')) {
        link.setLocalBase(emulationConfig(readSettings()));
      }
      if (event.affectsConfiguration('mxscope.history')) log('history limits apply to runs after the window reloads');
    }),
  );
  registerDashboard(context, services);
  registerCheckpoints(context, services);
  void restoreAndRememberRuns(context, services);
  // `npm start` opens a workspace that sets this, so a run streams into the dashboard as soon as the window is up.
  if (vscode.workspace.getConfiguration('mxscope').get<boolean>('emulation.startOnOpen', false)) {
    void vscode.commands.executeCommand('mxscope.startEmulatedRun').then(() => vscode.commands.executeCommand('mxscope.openDashboard'));
  }
  return services;
}

/** VS Code waits for this promise: the trainer child process and the checkpoint sample workers are gone when it resolves. */
export async function deactivate(): Promise<void> {
  await Promise.all([emulation?.stop(), stopSampleWorkers()]);
}

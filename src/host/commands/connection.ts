// Commands that start, connect to and leave trainers, and the status bar's quick actions.
import * as vscode from 'vscode';
import { splitTokenUrl } from '../../link/auth.js';
import { emulationSettingsChange } from '../../trainer/emulation-config.js';
import type { EmulationTrainer } from '../emulation.js';
import { quickActions } from '../model/status-text.js';
import type { HostServices } from '../services.js';

const LAST_URL_KEY = 'mxscope.lastUrl';
const tokenKey = (url: string) => `mxscope.token:${url}`;

/** Resolves once the link is connected; rejects with the reason if it closes or takes too long. */
export function whenConnected(services: HostServices, timeoutMs = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const { state, detail } = services.link.snapshot();
      if (state === 'connected') finish();
      // The client's detail carries the socket's own reason (e.g. "connect ECONNREFUSED 127.0.0.1:7340").
      else if (state === 'closed' || state === undefined) finish(new Error(detail?.startsWith('could not connect') ? detail : vscode.l10n.t('could not connect: {0}', detail ?? vscode.l10n.t('the connection was closed (see the MX Scope output)'))));
    };
    const finish = (error?: Error) => {
      clearTimeout(timer);
      subscription.dispose();
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => finish(new Error(vscode.l10n.t('not connected after {0} s: is the trainer running and the URL right?', timeoutMs / 1000))), timeoutMs);
    const subscription = services.link.onDidChange(check);
    check();
  });
}

export async function startEmulatedRun(services: HostServices, emulation: EmulationTrainer): Promise<void> {
  const settings = services.settings();
  const { info, started } = await emulation.ensureRunning(settings);
  if (started || services.link.activeUrl !== info.url) services.link.connect(info.url, info.token);
  await whenConnected(services);
  await services.link.changeNextRun(emulationSettingsChange(settings));
  const ack = await services.link.request({ type: 'startRun' });
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: started emulated run {0} ({1}).', ack.detail ?? '', settings.preset));
}

export async function connectToTrainer(services: HostServices, context: vscode.ExtensionContext): Promise<void> {
  const remembered = context.workspaceState.get<string>(LAST_URL_KEY) ?? services.settings().defaultUrl;
  const url = await vscode.window.showInputBox({
    title: vscode.l10n.t('MX Scope: Connect to Trainer'),
    prompt: vscode.l10n.t("The trainer's websocket URL as its MXSCOPE_LISTENING line prints it (with ?token=…)"),
    value: remembered,
    validateInput: (value) => (/^wss?:\/\/[^\s/]+/.test(value.trim()) ? undefined : vscode.l10n.t('a ws:// or wss:// URL, e.g. ws://127.0.0.1:7340/?token=…')),
  });
  if (!url) return;
  // A pasted URL with ?token= needs no second prompt; only the bare URL is remembered.
  const { url: trimmed, token: pasted } = splitTokenUrl(url.trim());
  const stored = await context.secrets.get(tokenKey(trimmed));
  const token = pasted ?? (await vscode.window.showInputBox({ title: vscode.l10n.t('MX Scope: token'), prompt: vscode.l10n.t("The token the trainer printed (leave empty only for a trainer started with --no-token). Kept in VS Code's secret storage."), password: true, value: stored ?? '' }));
  if (token === undefined) return;
  await context.workspaceState.update(LAST_URL_KEY, trimmed);
  if (token) await context.secrets.store(tokenKey(trimmed), token);
  else await context.secrets.delete(tokenKey(trimmed));
  services.link.connect(trimmed, token || undefined);
  await whenConnected(services);
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: connected to {0}.', trimmed));
}

export async function disconnect(services: HostServices, emulation: EmulationTrainer): Promise<void> {
  services.link.disconnect();
  await emulation.stop();
}

export async function showQuickActions(services: HostServices): Promise<void> {
  const { state, run } = services.link.snapshot();
  const picked = await vscode.window.showQuickPick(quickActions(state, run?.status === 'running'), { title: 'MX Scope', placeHolder: vscode.l10n.t('Quick actions') });
  if (picked) await vscode.commands.executeCommand(picked.command);
}

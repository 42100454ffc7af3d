// The status bar item's text and tooltip for each connection state.
import type { RunConfig } from '../../protocol/index.js';
import type { ConnectionState } from '../../link/trainer-client.js';
import type { RunSummary } from '../../store/run-store.js';
import { t } from './localize.js';
import { formatLoss, runLabel, statusText as runStatusText } from './run-tree.js';
import { describeGemms, recipeSummary } from './rotation-modes.js';
import { statsPlan } from './stats-coverage.js';

export interface StatusInput {
  /** undefined: never connected (or disconnected by the user). */
  state: ConnectionState | undefined;
  url: string | undefined;
  /** The newest live run, if any. */
  run: RunSummary | undefined;
  /** What the next run will use (the trainer's, or the local pending one). */
  nextRunConfig: RunConfig | undefined;
}

export interface StatusText {
  text: string;
  tooltip: string;
}

const STATE_ICONS: Record<ConnectionState, string> = { connecting: '$(sync~spin)', connected: '$(plug)', reconnecting: '$(sync~spin)', closed: '$(debug-disconnect)' };

export function statusText(input: StatusInput): StatusText {
  if (input.state === undefined || input.state === 'closed') {
    return { text: '$(debug-disconnect) MX Scope', tooltip: t('MX Scope: not connected. Click for quick actions (start an emulated run, connect to a trainer).') };
  }
  const icon = STATE_ICONS[input.state];
  const run = input.run;
  const live = run && run.status === 'running';
  const parts: string[] = [];
  if (input.state !== 'connected') parts.push(stateWord(input.state));
  // A run that has not finished a step yet is "starting", not "step -1 · loss —"; a run that just
  // diverged says so until the next one starts, rather than going quietly "idle".
  if (live && run.lastStep < 0) parts.push(runLabel(run, false), t('starting'));
  else if (live) parts.push(runLabel(run, false), t('step {0}', run.lastStep), t('loss {0}', formatLoss(run.lastLoss)));
  else if (run?.ended?.status === 'diverged') parts.push(`$(error) ${t('{0} diverged at step {1}', runLabel(run, false), run.ended.step)}`);
  else parts.push(t('idle'));
  const rotationOf = live ? run.config : input.nextRunConfig;
  if (rotationOf) parts.push(recipeSummary(rotationOf));
  const tooltip = [
    t('MX Scope: {0} to {1}', stateWord(input.state), input.url ?? t('a trainer')),
    run ? t('run: {0} ({1})', run.name, runStatusText(run.status)) : t('no run yet'),
    live && run.config ? t('this run: {0}', `${describeGemms(run.config)} · ${statsPlan(run.config)}`) : undefined,
    input.nextRunConfig ? t('next run: {0}', `${describeGemms(input.nextRunConfig)} · ${statsPlan(input.nextRunConfig)}`) : undefined,
    t('Click for quick actions.'),
  ].filter((line): line is string => line !== undefined).join('\n');
  return { text: `${icon} MX Scope: ${parts.join(' · ')}`, tooltip };
}

function stateWord(state: Exclude<ConnectionState, 'closed'>): string {
  switch (state) {
    case 'connecting': return t('connecting');
    case 'connected': return t('connected');
    case 'reconnecting': return t('reconnecting');
  }
}

export interface QuickAction {
  command: string;
  label: string;
}

/** The quick actions offered on a status bar click, by connection state. */
export function quickActions(state: ConnectionState | undefined, runActive: boolean): QuickAction[] {
  const connected = state === 'connected';
  const actions: QuickAction[] = [];
  if (!connected) actions.push({ command: 'mxscope.startEmulatedRun', label: t('$(play) Start Emulated Run') }, { command: 'mxscope.connect', label: t('$(plug) Connect to Trainer…') });
  if (connected && !runActive) actions.push({ command: 'mxscope.startNextRun', label: t('$(play) Start Next Run') });
  if (connected && runActive) actions.push({ command: 'mxscope.stopRun', label: t('$(debug-stop) Stop Run') }, { command: 'mxscope.saveCheckpoint', label: t('$(save) Save Checkpoint') });
  actions.push(
    { command: 'mxscope.switchRotationMode', label: t('$(symbol-misc) Switch Rotation Mode…') },
    { command: 'mxscope.setGemmPrecision', label: t('$(settings) Set GEMM Precision…') },
    { command: 'mxscope.setScaleRule', label: t('$(symbol-ruler) Set MX Scale Rule…') },
    { command: 'mxscope.setStatsCoverage', label: t('$(pulse) Set Stats Cadence and Coverage…') },
  );
  actions.push({ command: 'mxscope.openRunLog', label: t('$(folder-opened) Open Run Log…') });
  if (state !== undefined && state !== 'closed') actions.push({ command: 'mxscope.disconnect', label: t('$(debug-disconnect) Disconnect') });
  return actions;
}

// The status bar item's text and tooltip for each connection state.
import type { RunConfig } from '../../protocol/index.js';
import type { ConnectionState } from '../../link/trainer-client.js';
import type { RunSummary } from '../../store/run-store.js';
import { formatLoss, runLabel } from './run-tree.js';
import { describeGemms, recipeSummary } from './rotation-modes.js';

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
    return { text: '$(debug-disconnect) MX Scope', tooltip: 'MX Scope: not connected. Click for quick actions (start an emulated run, connect to a trainer).' };
  }
  const icon = STATE_ICONS[input.state];
  const run = input.run;
  const live = run && run.status === 'running';
  const parts: string[] = [];
  if (input.state !== 'connected') parts.push(input.state);
  // A run that has not finished a step yet is "starting", not "step -1 · loss —"; a run that just
  // diverged says so until the next one starts, rather than going quietly "idle".
  if (live && run.lastStep < 0) parts.push(runLabel(run, false), 'starting');
  else if (live) parts.push(runLabel(run, false), `step ${run.lastStep}`, `loss ${formatLoss(run.lastLoss)}`);
  else if (run?.ended?.status === 'diverged') parts.push(`$(error) ${runLabel(run, false)} diverged at step ${run.ended.step}`);
  else parts.push('idle');
  const rotationOf = live ? run.config : input.nextRunConfig;
  if (rotationOf) parts.push(recipeSummary(rotationOf));
  const tooltip = [
    `MX Scope: ${input.state} to ${input.url ?? 'a trainer'}`,
    run ? `run: ${run.name} (${run.status})` : 'no run yet',
    live && run.config ? `this run: ${describeGemms(run.config)}` : undefined,
    input.nextRunConfig ? `next run: ${describeGemms(input.nextRunConfig)}` : undefined,
    'Click for quick actions.',
  ].filter((line): line is string => line !== undefined).join('\n');
  return { text: `${icon} MX Scope: ${parts.join(' · ')}`, tooltip };
}

export interface QuickAction {
  command: string;
  label: string;
}

/** The quick actions offered on a status bar click, by connection state. */
export function quickActions(state: ConnectionState | undefined, runActive: boolean): QuickAction[] {
  const connected = state === 'connected';
  const actions: QuickAction[] = [];
  if (!connected) actions.push({ command: 'mxscope.startEmulatedRun', label: '$(play) Start Emulated Run' }, { command: 'mxscope.connect', label: '$(plug) Connect to Trainer…' });
  if (connected && !runActive) actions.push({ command: 'mxscope.startNextRun', label: '$(play) Start Next Run' });
  if (connected && runActive) actions.push({ command: 'mxscope.stopRun', label: '$(debug-stop) Stop Run' }, { command: 'mxscope.saveCheckpoint', label: '$(save) Save Checkpoint' });
  actions.push(
    { command: 'mxscope.switchRotationMode', label: '$(symbol-misc) Switch Rotation Mode…' },
    { command: 'mxscope.setGemmPrecision', label: '$(settings) Set GEMM Precision…' },
    { command: 'mxscope.setScaleRule', label: '$(symbol-ruler) Set MX Scale Rule…' },
  );
  actions.push({ command: 'mxscope.openRunLog', label: '$(folder-opened) Open Run Log…' });
  if (state !== undefined && state !== 'closed') actions.push({ command: 'mxscope.disconnect', label: '$(debug-disconnect) Disconnect' });
  return actions;
}

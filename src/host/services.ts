// What the extension's parts share: the run store, the output channel and the live link. The
// dashboard (dashboard/register.ts) and checkpoint (checkpoints/register.ts) parts get this.
import type * as vscode from 'vscode';
import type { RunStore } from '../store/run-store.js';
import type { LiveLink } from '../live/live-link.js';
import type { MxScopeSettings } from './settings.js';

export interface HostServices {
  /** Every run, live or loaded; subscribe with store.onDidChange. */
  readonly store: RunStore;
  /** The "MX Scope" output channel. */
  readonly output: vscode.OutputChannel;
  /**
   * The connection to a trainer: link.snapshot() (state, newest live run, next-run config),
   * link.onDidChange, link.changeNextRun(change), link.request({type: 'startRun', fromCheckpoint}).
   */
  readonly link: LiveLink;
  settings(): MxScopeSettings;
  /** Writes a timestamped line to the output channel. */
  log(line: string): void;
}

// Which alerts interrupt the user with a notification, and what it says: a live run's divergence
// or loss spike (once per run and kind), naming the step and the layer that moved first, with a
// button that opens the dashboard at that step.
import { alertFocus, type Alert, type FocusMessage } from '../protocol/webview.js';

export interface Notice {
  message: string;
  severity: 'error' | 'warning';
  /** What the "Show in Dashboard" button opens. */
  focus: FocusMessage;
  /** A checkpoint from before the event: the "Start Next Run from Checkpoint…" button starts from it. */
  checkpoint?: string;
}

export class NoticeFilter {
  private readonly shown = new Set<string>();

  /** The notification for `alert`, or null (not a loss event, or this run already had one of its kind). */
  notice(alert: Alert, runName: string): Notice | null {
    if (alert.kind !== 'divergence' && alert.kind !== 'loss-spike') return null;
    const key = `${alert.runId}\u0000${alert.kind}`;
    if (this.shown.has(key)) return null;
    this.shown.add(key);
    const what = alert.kind === 'divergence' ? `diverged at step ${alert.step}` : `loss spiked at step ${alert.step}`;
    const where = alert.layer === null ? 'no layer left its running range before it' : `first to move: ${alert.layer}${alert.gemm ? ` (${alert.gemm})` : ''}`;
    const kept = alert.checkpoint === undefined ? '' : ` A checkpoint from before it was kept: ${alert.checkpoint}.`;
    return {
      message: `MX Scope: ${runName} ${what}; ${where}.${kept}`,
      ...(alert.checkpoint === undefined ? {} : { checkpoint: alert.checkpoint }),
      severity: alert.kind === 'divergence' ? 'error' : 'warning',
      focus: alertFocus(alert),
    };
  }

  /** A run started again (same runId): it may notify again. */
  reset(runId: string): void {
    for (const key of [...this.shown]) if (key.startsWith(`${runId}\u0000`)) this.shown.delete(key);
  }
}

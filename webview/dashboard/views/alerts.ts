// Alerts: NaN scales, loss spikes, ‖∇W‖/‖E‖ below √3, divergence, each with its step and first layer;
// a click on a layer alert opens that layer's scales at that step.
import { GEMM_OPERANDS } from '../../../src/protocol/telemetry.js';
import type { Alert } from '../../../src/protocol/webview.js';
import { activatable, element, type Context, type View } from '../context.js';

const KIND_LABEL: Record<Alert['kind'], string> = { 'nan-scales': 'NaN scales', 'loss-spike': 'Loss spike', 'grad-to-err': '‖∇W‖/‖E‖ < √3', divergence: 'Divergence' };

/** `open`: what activating a layer alert does (default: its block scales at its step, in this view). */
export function alertList(ctx: Context, alerts: readonly Alert[], open?: (alert: Alert) => void): HTMLElement {
  const list = element('ul', 'alerts');
  if (alerts.length === 0) list.append(element('li', 'muted', 'No alerts.'));
  for (const alert of alerts) {
    const item = element('li', `alert ${alert.kind}`);
    const run = ctx.data.run(alert.runId);
    item.title = alert.message;
    item.append(element('strong', undefined, KIND_LABEL[alert.kind]), element('span', 'muted', ` · ${run?.name ?? alert.runId} · step ${alert.step}`), element('div', undefined, alert.message));
    if (alert.layer !== null) {
      const gemm = alert.gemm ?? ctx.state.gemm;
      const at = { tab: 'scales' as const, layer: alert.layer, gemm, operand: gemm === ctx.state.gemm ? ctx.state.operand : GEMM_OPERANDS[gemm][0], step: alert.step, runIds: [alert.runId], mode: 'single' as const };
      activatable(item, () => (open ? open(alert) : ctx.update(at, true)), `Open ${alert.layer}${alert.gemm ? ` (${alert.gemm})` : ''} at step ${alert.step}`);
    }
    list.append(item);
  }
  return list;
}

export class AlertsView implements View {
  readonly root = element('div', 'view alerts-view');

  constructor(private readonly ctx: Context) {
  }

  update(): void {
    const shown = new Set(this.ctx.shownRuns().map((run) => run.runId));
    this.root.replaceChildren(alertList(this.ctx, this.ctx.data.alerts.filter((alert) => shown.has(alert.runId))));
  }

  csv() {
    return {
      name: 'alerts.csv',
      header: ['run_id', 'run', 'kind', 'step', 'layer', 'gemm', 'message'],
      rows: this.ctx.data.alerts.map((a) => [a.runId, this.ctx.data.run(a.runId)?.name ?? a.runId, a.kind, a.step, a.layer, a.gemm ?? null, a.message]),
    };
  }

  canvas(): null {
    return null;
  }

  destroy(): void {}
}

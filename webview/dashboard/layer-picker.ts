// Picks (layer, GEMM, operand) for a run: a name/regex filter narrows the layer list (a 224-layer
// run never builds all options at once), then dropdowns choose among at most LIMIT matches.
import { GEMM_KINDS, type GemmKind } from '../../src/protocol/config.js';
import { GEMM_OPERANDS, type Operand } from '../../src/protocol/telemetry.js';
import { LAYER_METRICS, type RunInfo } from '../../src/protocol/webview.js';
import { filterLayers, worstFirst } from './model/ui-state.js';
import { dropdown, textField } from '../ui/toolkit.js';
import { element, type Context } from './context.js';

const LIMIT = 200;
const OPERAND_LABELS: Record<Operand, string> = { x: 'x (activations)', w: 'w (weights)', dy: 'dy (output gradient)' };

/**
 * The layer every panel shows (compared runs stay on the same layer): the chosen one if the first
 * panel's run has it, else that run's worst layer by the overview metric.
 */
export function currentLayer(ctx: Context): string | null {
  const run = panelRuns(ctx)[0];
  if (!run) return null;
  const chosen = ctx.state.layer;
  if (chosen !== null && run.layers.includes(chosen)) return chosen;
  const overview = ctx.data.overview.get(run.runId);
  const worst = overview ? worstFirst(overview.rows, ctx.state.overviewMetric)[0] : undefined;
  const metricIndex = LAYER_METRICS.indexOf(ctx.state.overviewMetric);
  return worst && worst.values[metricIndex] !== null ? worst.layer : (run.layers[0] ?? null);
}

/**
 * `withGemmAndOperand`: false where the view's GEMM is fixed (Wgrad error correlation reads wgrad's
 * dy only), so no dropdown offers a choice that changes nothing on screen.
 */
export function layerPicker(ctx: Context, run: RunInfo, withGemmAndOperand: boolean): HTMLElement {
  const bar = element('div', 'controls');
  const slot = element('span', 'layer-slot');
  const count = element('span', 'muted');
  const fill = (query: string): void => {
    const { names, total } = filterLayers(run.layers, query, LIMIT);
    const selected = currentLayer(ctx);
    if (selected !== null && !names.includes(selected)) names.unshift(selected);
    slot.replaceChildren(dropdown(names.map((name) => ({ value: name, label: name })), selected, (layer) => ctx.update({ layer }), 'layer'));
    count.textContent = `${Math.min(total, LIMIT)} of ${run.layers.length} layers${total > LIMIT ? ` (first ${LIMIT} shown)` : ''}`;
  };
  fill(ctx.state.layerFilter);
  const filter = textField(ctx.state.layerFilter, 'filter layers (name or regex)', (layerFilter) => {
    ctx.update({ layerFilter });
    fill(layerFilter);
  });
  bar.append(filter, slot, count);
  if (withGemmAndOperand) {
    bar.append(
      dropdown(GEMM_KINDS.map((gemm) => ({ value: gemm, label: gemm })), ctx.state.gemm, (gemm) => ctx.update({ gemm: gemm as GemmKind, operand: GEMM_OPERANDS[gemm as GemmKind][0] }, true), 'GEMM'),
      dropdown(GEMM_OPERANDS[ctx.state.gemm].map((operand) => ({ value: operand, label: OPERAND_LABELS[operand] })), ctx.state.operand, (operand) => ctx.update({ operand: operand as Operand }), 'operand'),
    );
  }
  return bar;
}

/** The runs a per-layer view draws panels for: up to four compared runs, else the focused run. */
export function panelRuns(ctx: Context): RunInfo[] {
  const shown = ctx.shownRuns();
  return ctx.state.mode === 'compare' ? shown.slice(0, 4) : shown.slice(0, 1);
}

/** `panelRuns`, or null after telling `root` there is nothing to show yet. */
export function panelRunsOrNote(ctx: Context, root: HTMLElement): [RunInfo, ...RunInfo[]] | null {
  const runs = panelRuns(ctx);
  if (runs.length > 0) return runs as [RunInfo, ...RunInfo[]];
  root.append(element('p', 'note', 'No runs yet.'));
  return null;
}

/** The controls row of a per-layer view: in single mode it starts with the run picker. */
export function controlsWithRunPicker(ctx: Context): HTMLElement {
  const bar = element('div', 'controls');
  const picker = runPicker(ctx);
  if (picker) bar.append(picker);
  return bar;
}

/** In single mode, which run the layer views look at. */
function runPicker(ctx: Context): HTMLElement | null {
  if (ctx.state.mode === 'compare' || ctx.data.runs.length < 2) return null;
  const focus = ctx.shownRuns()[0]?.runId ?? null;
  return dropdown(
    ctx.data.runs.map((run) => ({ value: run.runId, label: run.name })),
    focus,
    (runId) => ctx.update({ runIds: [runId, ...ctx.state.runIds.filter((id) => id !== runId)] }, true),
    'run',
  );
}

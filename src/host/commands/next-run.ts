// Commands that steer the trainer: next-run rotation/precision/scale rule, start, stop, save a checkpoint.
import * as vscode from 'vscode';
import type { GemmKind, HadamardBlock, Precision } from '../../protocol/index.js';
import {
  BLOCK_CHOICES,
  GEMM_CHOICES,
  GEMM_LABELS,
  modeOf,
  precisionChange,
  PRECISION_CHOICES,
  rotationChange,
  ROTATION_MODES,
  type RotationMode,
} from '../model/rotation-modes.js';
import { defaultRuleGemms, ruleGemms, scaleRuleChange, scaleRulesNow, SCALE_RULE_CHOICES } from '../model/scale-rules.js';
import { COVERAGE_CHOICES, coverageChange, coverageOf, coverageSummary, intervalChoices, measuredCost, sameCoverage, type Coverage } from '../model/stats-coverage.js';
import type { HostServices } from '../services.js';

const LAST_GEMMS_KEY = 'mxscope.rotationGemms';
// The multi-step pickers below stay open when focus moves (a click on the dashboard), so a half-made
// choice is not dropped without a word; Escape still cancels.

export async function switchRotationMode(services: HostServices, context: vscode.ExtensionContext): Promise<void> {
  const next = services.link.nextRunConfig();
  const current = next ? modeOf(next.gemms.wgrad) : undefined;
  const mode = await vscode.window.showQuickPick(
    ROTATION_MODES.map((m) => ({ label: m.label, detail: m.detail, description: m.id === current ? vscode.l10n.t('(Wgrad now)') : '', mode: m })),
    { title: vscode.l10n.t('MX Scope: rotation mode for the next run (1/3)'), placeHolder: vscode.l10n.t('How block-format (MXFP4, NVFP4, MXFP8) operands are rotated and rounded'), ignoreFocusOut: true },
  );
  if (!mode) return;
  const block = await pickBlock(mode.mode, next?.gemms.wgrad.hadamardBlock);
  if (block === undefined) return;
  const remembered = context.workspaceState.get<GemmKind[]>(LAST_GEMMS_KEY) ?? ['wgrad'];
  const gemms = await vscode.window.showQuickPick(
    GEMM_CHOICES.map((kind) => ({ label: GEMM_LABELS[kind], picked: remembered.includes(kind), gemm: kind })),
    { title: vscode.l10n.t('MX Scope: apply to which GEMMs? (3/3)'), canPickMany: true, placeHolder: vscode.l10n.t('They run in MXFP4 with this mode (NVFP4 and MXFP8 GEMMs keep their format)'), ignoreFocusOut: true },
  );
  if (!gemms || gemms.length === 0) return;
  const kinds = gemms.map((g) => g.gemm);
  await context.workspaceState.update(LAST_GEMMS_KEY, kinds);
  const outcome = await services.link.changeNextRun(rotationChange(mode.mode.id, block, kinds, next?.gemms));
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: {0} on {1} — {2}.', mode.label, kinds.join(', '), outcome));
}

async function pickBlock(mode: RotationMode, current: HadamardBlock | undefined): Promise<HadamardBlock | undefined> {
  if (!mode.needsBlock) return current ?? 32;
  const picked = await vscode.window.showQuickPick(
    BLOCK_CHOICES.map((block) => ({ label: String(block), description: block === current ? vscode.l10n.t('(now)') : '', block })),
    { title: vscode.l10n.t('MX Scope: Hadamard block size (2/3)'), placeHolder: vscode.l10n.t('Rotation block along the reduction dimension'), ignoreFocusOut: true },
  );
  return picked?.block;
}

export async function setGemmPrecision(services: HostServices): Promise<void> {
  const next = services.link.nextRunConfig();
  const gemm = await vscode.window.showQuickPick(
    GEMM_CHOICES.map((kind) => ({ label: GEMM_LABELS[kind], description: next ? vscode.l10n.t('now {0}', next.gemms[kind].precision) : '', gemm: kind })),
    { title: vscode.l10n.t('MX Scope: GEMM precision for the next run (1/2)'), ignoreFocusOut: true },
  );
  if (!gemm) return;
  const precision = await vscode.window.showQuickPick(
    PRECISION_CHOICES.map((p: Precision) => ({ label: p, description: p === next?.gemms[gemm.gemm].precision ? vscode.l10n.t('(now)') : '', precision: p })),
    { title: vscode.l10n.t('MX Scope: precision of {0} (2/2)', gemm.gemm), ignoreFocusOut: true },
  );
  if (!precision) return;
  const outcome = await services.link.changeNextRun(precisionChange(gemm.gemm, precision.precision));
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: {0} → {1} — {2}.', gemm.gemm, precision.label, outcome));
}

/** The MX scale rule (floor, rceil, even) of the next run: for the whole run or per GEMM. */
export async function setScaleRule(services: HostServices): Promise<void> {
  const current = services.link.nextRunConfig()?.gemms;
  const now = current ? scaleRulesNow(current) : undefined;
  const choice = await vscode.window.showQuickPick(
    SCALE_RULE_CHOICES.map((c) => ({ label: c.label, detail: c.detail, description: now === c.rule ? vscode.l10n.t('(now)') : '', choice: c })),
    { title: vscode.l10n.t('MX Scope: MX scale rule for the next run (1/2)'), placeHolder: now ? vscode.l10n.t('How E8M0 block scales are picked; now: {0}', now) : vscode.l10n.t('How E8M0 block scales are picked'), ignoreFocusOut: true },
  );
  if (!choice) return;
  const rule = choice.choice.rule;
  const picked = defaultRuleGemms(rule, current);
  const leftOut = GEMM_CHOICES.filter((kind) => !ruleGemms(rule, current).includes(kind));
  const gemms = await vscode.window.showQuickPick(
    ruleGemms(rule, current).map((kind) => ({
      label: GEMM_LABELS[kind],
      description: current ? vscode.l10n.t('now {0}', `${current[kind].precision} · ${current[kind].scaleRule ?? 'floor'}`) : '',
      picked: picked.includes(kind),
      gemm: kind,
    })),
    {
      title: vscode.l10n.t('MX Scope: use {0} on which GEMMs? (2/2)', rule),
      canPickMany: true,
      placeHolder: leftOut.length > 0
        ? vscode.l10n.t('{0} run NVFP4 (E4M3 scales, no rule) and are not listed', leftOut.join(', '))
        : vscode.l10n.t('MXFP4 and MXFP8 GEMMs quantize with it; fp32, bf16 and fp8 GEMMs measure their MXFP4 stats with it'),
      ignoreFocusOut: true,
    },
  );
  if (!gemms || gemms.length === 0) return;
  const kinds = gemms.map((g) => g.gemm);
  const outcome = await services.link.changeNextRun(scaleRuleChange(rule, kinds, current));
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: scale rule {0} on {1} — {2}.', rule, kinds.join(', '), outcome));
}

/**
 * How often the next run measures stats, and what each stats step measures: every layer exactly, or
 * an opt-in that cuts what telemetry costs a large model (layer groups, a sampled Wgrad error), each
 * shown with what an earlier run with the same choice measured it to cost.
 */
export async function setStatsCoverage(services: HostServices): Promise<void> {
  const next = services.link.nextRunConfig();
  const runs = services.store.list().map((run) => ({ name: run.name, config: run.config, cost: services.store.get(run.runId)?.telemetryCost() }));
  const now = next ? coverageOf(next) : undefined;
  // "(now) · measured +8.2 % in <run>": what is set, and what a run with it measured.
  const description = (isNow: boolean, every: number, coverage: Coverage) =>
    [isNow ? vscode.l10n.t('(now)') : '', measuredCost(runs, every, coverage) ?? ''].filter((part) => part !== '').join(' · ');
  const interval = await vscode.window.showQuickPick(
    intervalChoices(next?.statsEvery).map((every) => ({ label: vscode.l10n.t('every {0} steps', every), description: description(every === next?.statsEvery, every, now ?? COVERAGE_CHOICES[0]!), every })),
    { title: vscode.l10n.t('MX Scope: how often the next run measures stats (1/2)'), placeHolder: vscode.l10n.t('Steps between two stats steps: what telemetry costs falls with it'), ignoreFocusOut: true },
  );
  if (!interval) return;
  const coverage = await vscode.window.showQuickPick(
    COVERAGE_CHOICES.map((choice) => ({
      label: choice.label,
      detail: choice.detail,
      description: description(now !== undefined && sameCoverage(choice, now), interval.every, choice),
      choice,
    })),
    { title: vscode.l10n.t('MX Scope: what each stats step measures (2/2)'), placeHolder: vscode.l10n.t('Opt-ins cut what telemetry costs a large model; the Runs view shows each run\'s cost'), ignoreFocusOut: true },
  );
  if (!coverage) return;
  const outcome = await services.link.changeNextRun(coverageChange(interval.every, coverage.choice, now));
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: stats {0} — {1}.', coverageSummary(interval.every, coverage.choice), outcome));
}

export async function startNextRun(services: HostServices): Promise<void> {
  if (!services.link.connected) {
    const start = vscode.l10n.t('Start Emulated Run');
    const connect = vscode.l10n.t('Connect to Trainer…');
    const choice = await vscode.window.showWarningMessage(vscode.l10n.t('MX Scope: no trainer is connected.'), start, connect);
    if (choice === start) await vscode.commands.executeCommand('mxscope.startEmulatedRun');
    if (choice === connect) await vscode.commands.executeCommand('mxscope.connect');
    return;
  }
  const ack = await services.link.request({ type: 'startRun' });
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: started run {0}.', ack.detail ?? ''));
}

/** Start the next run from a checkpoint: `target` (e.g. from the checkpoint editor), or one picked. */
export async function startFromCheckpoint(services: HostServices, target?: vscode.Uri): Promise<void> {
  const path = target?.fsPath ?? (await pickCheckpoint(services));
  if (!path) return;
  const ack = await services.link.request({ type: 'startRun', fromCheckpoint: path });
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: started run {0} from {1}.', ack.detail ?? '', path));
}

/** A checkpoint the connected trainer saved, or any .safetensors file (the trainer must be able to read it). */
async function pickCheckpoint(services: HostServices): Promise<string | undefined> {
  const saved = services.store
    .list()
    .filter((run) => run.source === 'live')
    .flatMap((run) => (services.store.get(run.runId)?.checkpoints() ?? []).map((checkpoint) => ({ run, checkpoint })));
  const browse = { label: `$(folder-opened) ${vscode.l10n.t('Browse…')}`, path: '' };
  const picked = await vscode.window.showQuickPick(
    [...saved.reverse().map(({ run, checkpoint }) => ({ label: `$(save) ${run.name}`, description: `${vscode.l10n.t('step {0}', checkpoint.step)}${checkpoint.reason ? ` · ${checkpoint.reason}` : ''}`, detail: checkpoint.path, path: checkpoint.path })), browse],
    { title: vscode.l10n.t('MX Scope: start the next run from a checkpoint'), placeHolder: vscode.l10n.t('A checkpoint the trainer saved, or a file') },
  );
  if (picked !== browse) return picked?.path;
  const file = await vscode.window.showOpenDialog({ canSelectMany: false, filters: { [vscode.l10n.t('Safetensors')]: ['safetensors'] }, openLabel: vscode.l10n.t('Start from this checkpoint') });
  return file?.[0]?.fsPath;
}

export async function stopRun(services: HostServices): Promise<void> {
  await services.link.request({ type: 'stopRun' });
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: run stopped.'));
}

export async function saveCheckpoint(services: HostServices): Promise<void> {
  const ack = await services.link.request({ type: 'saveCheckpoint' });
  void vscode.window.showInformationMessage(vscode.l10n.t('MX Scope: checkpoint saved to {0}.', ack.detail ?? vscode.l10n.t('(path not reported)')));
}

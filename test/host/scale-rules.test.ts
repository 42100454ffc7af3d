// "Set MX Scale Rule…": the rules offered, which GEMMs a rule may apply to, the change a choice
// sends, and what the next run then shows in the status bar and the Runs view.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gemmRecipeProblems, mergeRunConfig, SCALE_RULES, type GemmConfigs } from '../../src/protocol/index.js';
import { configRows } from '../../src/host/model/run-tree.js';
import { defaultRuleGemms, ruleGemms, scaleRuleChange, scaleRulesNow, SCALE_RULE_CHOICES } from '../../src/host/model/scale-rules.js';
import { quickActions, statusText } from '../../src/host/model/status-text.js';
import { RunStore } from '../../src/store/run-store.js';
import { baseConfig } from '../link/fake-run.js';

const gemms = (precisions: Record<string, 'mxfp4' | 'mxfp8' | 'nvfp4' | 'bf16'>): GemmConfigs =>
  Object.fromEntries(Object.entries(baseConfig.gemms).map(([kind, g]) => [kind, { ...g, precision: precisions[kind] ?? g.precision }])) as GemmConfigs;

test('the picker offers every scale rule once, floor first as the default', () => {
  assert.deepEqual(SCALE_RULE_CHOICES.map((c) => c.rule), [...SCALE_RULES]);
  assert.match(SCALE_RULE_CHOICES[0]!.label, /default/);
  for (const choice of SCALE_RULE_CHOICES) assert.ok(choice.detail.length > 20, `${choice.rule} explains itself`);
});

test('a rule goes to the picked GEMMs only, for the whole run or per GEMM', () => {
  const current = gemms({ fprop: 'mxfp4', dgrad: 'mxfp8', wgrad: 'bf16' });
  assert.deepEqual(scaleRuleChange('rceil', ['fprop', 'dgrad', 'wgrad'], current), { gemms: { fprop: { scaleRule: 'rceil' }, dgrad: { scaleRule: 'rceil' }, wgrad: { scaleRule: 'rceil' } } });
  const perGemm = scaleRuleChange('even', ['dgrad'], current);
  assert.deepEqual(perGemm, { gemms: { dgrad: { scaleRule: 'even' } } });
  const next = mergeRunConfig({ ...baseConfig, gemms: current }, perGemm);
  assert.equal(next.gemms.dgrad.scaleRule, 'even');
  assert.equal(next.gemms.dgrad.precision, 'mxfp8', 'the precision stays');
  assert.equal(next.gemms.fprop.scaleRule ?? 'floor', 'floor', 'GEMMs not picked keep theirs');
  assert.equal(scaleRulesNow(next.gemms), 'fprop,wgrad floor · dgrad even');
  assert.equal(scaleRulesNow(current), 'floor');
  // MX GEMMs are picked by default; with none, every GEMM the rule can apply to.
  assert.deepEqual(defaultRuleGemms('rceil', current), ['fprop', 'dgrad']);
  assert.deepEqual(defaultRuleGemms('rceil', gemms({ fprop: 'bf16', dgrad: 'bf16', wgrad: 'bf16' })), ['fprop', 'dgrad', 'wgrad']);
});

test('NVFP4 GEMMs are not offered a rule other than floor, and asking for one names what to change', () => {
  const current = gemms({ fprop: 'nvfp4', dgrad: 'mxfp8', wgrad: 'mxfp4' });
  assert.deepEqual(ruleGemms('rceil', current), ['dgrad', 'wgrad']);
  assert.deepEqual(ruleGemms('floor', current), ['fprop', 'dgrad', 'wgrad'], 'floor (no rule) is fine everywhere');
  assert.throws(() => scaleRuleChange('even', ['fprop', 'wgrad'], current), /NVFP4 GEMMs \(fprop\) keep NVIDIA's E4M3 block scales — leave them out or set their precision to mxfp4\/mxfp8/);
  // What the picker refuses, the trainer refuses too.
  assert.match(gemmRecipeProblems('fprop', { ...current.fprop, scaleRule: 'even' }).join(), /scale rule 'even' is for MX formats/);
  for (const rule of SCALE_RULES) {
    const next = mergeRunConfig({ ...baseConfig, gemms: current }, scaleRuleChange(rule, ruleGemms(rule, current), current));
    for (const kind of ['fprop', 'dgrad', 'wgrad'] as const) assert.deepEqual(gemmRecipeProblems(kind, next.gemms[kind]), [], `${rule} ${kind}`);
  }
});

test('the quick actions offer the scale rule beside rotation and precision, in every connection state', () => {
  for (const [state, running] of [[undefined, false], ['connected', false], ['connected', true]] as const) {
    const commands = quickActions(state, running).map((a) => a.command);
    const at = commands.indexOf('mxscope.setScaleRule');
    assert.ok(at > 0 && commands[at - 1] === 'mxscope.setGemmPrecision', `${state} ${running}: ${commands.join()}`);
  }
  assert.match(quickActions('connected', false).find((a) => a.command === 'mxscope.setScaleRule')!.label, /Set MX Scale Rule…$/);
});

test('the next run shows the chosen rule in the status bar and the Runs view config rows', () => {
  const current = gemms({ fprop: 'mxfp4', dgrad: 'mxfp4', wgrad: 'mxfp8' });
  const next = mergeRunConfig({ ...baseConfig, gemms: current }, scaleRuleChange('rceil', ['dgrad', 'wgrad'], current));
  const idle = statusText({ state: 'connected', url: 'ws://x', run: undefined, nextRunConfig: next });
  assert.match(idle.text, /F mxfp4 · D mxfp4 · rceil · W mxfp8 · rceil$/);
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'r', name: 'rules', startedAt: 't', trainer: { name: 'x', version: '1' }, config: next, layers: [] });
  const rows = configRows(store.list()[0]!);
  assert.equal(rows.find((r) => r.label === 'dgrad')?.value, 'mxfp4 · no rotation · nearest-even · scale rule rceil');
  assert.equal(rows.find((r) => r.label === 'fprop')?.value, 'mxfp4 · no rotation · nearest-even', 'floor (the default) is not spelled out');
});

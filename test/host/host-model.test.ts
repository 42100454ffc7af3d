import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeRunConfig, wgradErrorScopeLabel } from '../../src/protocol/index.js';
import { combineChanges, isEmptyChange } from '../../src/live/next-run-change.js';
import { describeGemms, modeOf, precisionChange, rotationChange, recipeSummary, ROTATION_MODES } from '../../src/host/model/rotation-modes.js';
import { configRows, runRow } from '../../src/host/model/run-tree.js';
import { quickActions, statusText } from '../../src/host/model/status-text.js';
import { userMessage } from '../../src/host/model/user-message.js';
import { distinctNames } from '../../src/host/model/distinct-names.js';
import { RunStore } from '../../src/store/run-store.js';
import { runInfo } from '../../src/dashboard/views.js';
import type { GemmRotationFit, LayerInfo, LayerStatsRecord } from '../../src/protocol/telemetry.js';
import { simulatedNote } from '../../src/shared/gemm-notes.js';
import { baseConfig } from '../link/fake-run.js';

test('every rotation mode round-trips through modeOf on the GEMMs it was applied to, and only those', () => {
  const fp32 = mergeRunConfig(baseConfig, precisionChange('fprop', 'fp32'));
  for (const mode of ROTATION_MODES) {
    const config = mergeRunConfig(fp32, rotationChange(mode.id, 64, ['wgrad', 'dgrad']));
    assert.equal(config.gemms.dgrad.precision, 'mxfp4', 'rotation modes are MXFP4 recipes');
    assert.equal(config.gemms.fprop.precision, 'fp32');
    assert.equal(modeOf(config.gemms.wgrad), mode.id);
    assert.equal(modeOf(config.gemms.dgrad), mode.id);
    assert.equal(modeOf(config.gemms.fprop), 'none', 'fprop untouched');
    if (mode.needsBlock) assert.equal(config.gemms.wgrad.hadamardBlock, 64);
  }
  const fixed = mergeRunConfig(baseConfig, rotationChange('fixed-sign-hadamard', 16, ['wgrad'])).gemms.wgrad;
  assert.deepEqual([fixed.precision, fixed.rotation, fixed.hadamardBlock], ['mxfp4', 'fixed-sign-hadamard', 16]);
  assert.equal(describeGemms({ gemms: { ...baseConfig.gemms, wgrad: fixed } }).endsWith('W mxfp4 · FSH16'), true);
  // A GEMM already in NVFP4 or MXFP8 keeps its format; others move to MXFP4.
  const nvfp4 = mergeRunConfig(baseConfig, { gemms: { wgrad: { precision: 'nvfp4' }, dgrad: { precision: 'mxfp8' } } });
  const rotated = mergeRunConfig(nvfp4, rotationChange('fixed-sign-hadamard', 16, ['wgrad', 'dgrad', 'fprop'], nvfp4.gemms)).gemms;
  assert.deepEqual([rotated.wgrad.precision, rotated.dgrad.precision], ['nvfp4', 'mxfp8']);
  assert.equal(rotated.fprop.precision, 'mxfp4');
  assert.equal(modeOf(rotated.wgrad), 'fixed-sign-hadamard');
  const rhtsr = mergeRunConfig(baseConfig, rotationChange('random-hadamard-sr', 16, ['wgrad'])).gemms.wgrad;
  assert.deepEqual({ ...rhtsr }, { precision: 'mxfp4', rotation: 'random-hadamard', hadamardBlock: 16, rounding: 'stochastic', srPrescale: true });
  assert.deepEqual(rotationChange('hadamard', 32, []), { gemms: {} });
});

test('changes combine field by field, later wins, other GEMMs and fields kept', () => {
  const combined = combineChanges(combineChanges(rotationChange('hadamard', 16, ['wgrad', 'fprop']), precisionChange('wgrad', 'fp8')), { seed: 3 });
  assert.deepEqual(combined, { gemms: { fprop: { precision: 'mxfp4', rotation: 'hadamard', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false }, wgrad: { precision: 'fp8', rotation: 'hadamard', hadamardBlock: 16, rounding: 'nearest-even', srPrescale: false } }, seed: 3 });
  assert.equal(isEmptyChange({}), true);
  assert.equal(isEmptyChange({ gemms: {} }), true);
  assert.equal(isEmptyChange(combined), false);
});

test('GEMM description collapses when the three agree', () => {
  assert.equal(describeGemms(baseConfig), 'all mxfp4');
  const mixed = mergeRunConfig(baseConfig, combineChanges(rotationChange('random-hadamard-sr', 16, ['wgrad']), precisionChange('fprop', 'bf16')));
  assert.equal(describeGemms(mixed), 'F bf16 · D mxfp4 · W mxfp4 · RHT16+SR¾');
  assert.equal(recipeSummary(mixed), 'F bf16 · D mxfp4 · W mxfp4 · RHT16+SR¾');
  assert.equal(recipeSummary(mergeRunConfig(baseConfig, rotationChange('hadamard', 32, ['dgrad', 'wgrad']))), 'F mxfp4 · D,W mxfp4 · H32');
  assert.equal(recipeSummary(mergeRunConfig(baseConfig, { gemms: { fprop: { precision: 'fp32' }, dgrad: { precision: 'bf16' }, wgrad: { precision: 'fp8' } } })), 'F fp32 · D bf16 · W fp8');
  assert.equal(recipeSummary(mergeRunConfig(baseConfig, precisionChange('dgrad', 'bf16'))), 'F,W mxfp4 · D bf16', 'a non-MXFP4 GEMM is named, not dropped');
});

test('runs view rows: running vs ended wording, config rows from the run config', () => {
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'r', name: 'tiny · H16', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [] });
  store.ingest({ type: 'step', runId: 'r', step: 7, tokens: 100, loss: 3.14159, lr: 1, gradNorm: 1, stepMs: 1 });
  assert.equal(runRow(store.list()[0]!).description, 'running · step 7 · loss 3.1416');
  store.ingest({ type: 'runEnded', runId: 'r', step: 7, status: 'diverged', reason: 'loss NaN', endedAt: 't' });
  const row = runRow(store.list()[0]!);
  assert.equal(row.description, 'diverged · step 7 · final loss 3.1416');
  assert.equal(row.icon, 'warning');
  assert.match(row.tooltip, /diverged — loss NaN/);
  const rows = configRows(store.list()[0]!);
  assert.deepEqual(rows.find((r) => r.label === 'wgrad'), { label: 'wgrad', value: 'mxfp4 · no rotation · nearest-even' });
  assert.equal(row.label, 'tiny · H16', 'short names are shown as they are');
  store.ingest({ type: 'runStarted', runId: 'long', name: 'tiny · fprop fp32 · dgrad fp32 · wgrad mxfp4 · H16', startedAt: '2026-11-21T16:49:10.000Z', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [] });
  assert.equal(runRow(store.get('long')!.summary).label, 'tiny · F,D,W mxfp4 · 16:49');
});

test('runs view "stats every" row names the opt-in layer groups and how often each layer reports', () => {
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'all', name: 'all', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [] });
  store.ingest({ type: 'runStarted', runId: 'grouped', name: 'grouped', startedAt: 't', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, statsLayerGroups: 4 }, layers: [] });
  const cadence = (runId: string) => configRows(store.get(runId)!.summary).find((r) => r.label === 'stats every')?.value;
  assert.equal(cadence('all'), `${baseConfig.statsEvery} steps`);
  assert.equal(cadence('grouped'), `${baseConfig.statsEvery} steps, 1 of 4 layer groups each (a layer every ${baseConfig.statsEvery * 4} steps)`);
});

test('runs view names a run that measures each rank\'s own Wgrad error, and no row for the default', () => {
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'batch', name: 'batch', startedAt: 't', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, wgradErrorScope: 'batch' }, layers: [] });
  store.ingest({ type: 'runStarted', runId: 'rank', name: 'rank', startedAt: 't', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, wgradErrorScope: 'rank' }, layers: [] });
  const scope = (runId: string) => configRows(store.get(runId)!.summary).find((r) => r.label === 'Wgrad error')?.value;
  assert.equal(scope('batch'), undefined);
  assert.equal(scope('rank'), "each rank's own, mean over ranks");
  assert.equal(scope('rank'), wgradErrorScopeLabel('rank'), 'the dashboard\'s words');
});

test('runs view names a run whose Wgrad error is estimated from 1 in N rows, and no row for every row', () => {
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'all', name: 'all', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [] });
  store.ingest({ type: 'runStarted', runId: 'one', name: 'one', startedAt: 't', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, wgradErrorRowStride: 1 }, layers: [] });
  store.ingest({ type: 'runStarted', runId: 'sampled', name: 'sampled', startedAt: 't', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, wgradErrorRowStride: 4 }, layers: [] });
  const rows = (runId: string) => configRows(store.get(runId)!.summary).find((r) => r.label === 'Wgrad error rows')?.value;
  assert.equal(rows('all'), undefined);
  assert.equal(rows('one'), undefined, 'a stride of 1 is every row, exact');
  assert.equal(rows('sampled'), '1 in 4 (estimate)');
});

test('the Runs view names lag-1 turned off (wgradErrorLag1 false) and says nothing of the default', () => {
  const store = new RunStore();
  for (const [runId, lag1] of [['default', undefined], ['on', true], ['off', false]] as const) {
    const config = lag1 === undefined ? baseConfig : { ...baseConfig, wgradErrorLag1: lag1 };
    store.ingest({ type: 'runStarted', runId, name: runId, startedAt: 't', trainer: { name: 'x', version: '1' }, config, layers: [] });
  }
  const row = (runId: string) => configRows(store.get(runId)!.summary).find((r) => r.label === 'Wgrad error lag-1')?.value;
  assert.equal(row('default'), undefined);
  assert.equal(row('on'), undefined);
  assert.equal(row('off'), 'off (opt-in: no step before a stats step measured)');
});

test('runs view says what telemetry costs the run\'s steps once it has steps with and without stats', () => {
  const store = new RunStore();
  const layer: LayerInfo = { name: 'mix', kind: 'mix', block: 0, outFeatures: 64, inFeatures: 64, sketchIndices: [] };
  store.ingest({ type: 'runStarted', runId: 'r', name: 'r', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [layer] });
  const operand = { blocks: 0, elements: 0, histogram: { minExp: 0, counts: [], nanBlocks: 0 }, saturatedFrac: 0, flushedFrac: 0, sqnrDb: null };
  const cost = () => configRows(store.get('r')!.summary, store.get('r')).find((r) => r.label === 'telemetry cost')?.value;
  const step = (n: number, stepMs: number) => {
    store.ingest({ type: 'step', runId: 'r', step: n, tokens: n, loss: 1, lr: 1, gradNorm: 1, stepMs });
    if (n % 10 === 0) store.ingest({ type: 'layerStats', runId: 'r', step: n, layer: 'mix', gemm: 'fprop', precision: 'mxfp4', operands: [{ operand: 'x', ...operand }, { operand: 'w', ...operand }] });
  };
  step(0, 400);
  assert.equal(cost(), undefined, 'no steps without stats yet');
  for (let n = 1; n <= 30; n++) step(n, n % 10 === 0 ? 400 : (n + 1) % 10 === 0 ? 250 : 200);
  // Steps 0…29, up to the newest stats step: 3 stats steps (400 ms), 3 before one (250 ms), 24 others (200 ms): 6,750 ms against 30 × 200.
  assert.equal(cost(), '+12.5 % step time over the last 30 steps (medians: stats steps 400 ms, the steps before them 250 ms, others 200 ms)');
  assert.equal(configRows(store.get('r')!.summary).find((r) => r.label === 'telemetry cost'), undefined, 'without the run\'s records, no row');
  // A trainer that sends a step record every 5 steps (a Trainer's logging_steps) sends none before a stats step.
  const sparse = new RunStore();
  sparse.ingest({ type: 'runStarted', runId: 's', name: 's', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [layer] });
  for (let n = 0; n <= 100; n += 5) {
    sparse.ingest({ type: 'step', runId: 's', step: n, tokens: n, loss: 1, lr: 1, gradNorm: 1, stepMs: n % 10 === 0 ? 300 : 200 });
    if (n % 10 === 0) sparse.ingest({ type: 'layerStats', runId: 's', step: n, layer: 'mix', gemm: 'fprop', precision: 'mxfp4', operands: [{ operand: 'x', ...operand }, { operand: 'w', ...operand }] });
  }
  assert.equal(configRows(sparse.get('s')!.summary, sparse.get('s')).find((r) => r.label === 'telemetry cost')?.value,
    '+5.0 % step time over the last 100 steps (medians: stats steps 300 ms, others 200 ms)', 'a stats step every 10 steps, 100 ms more: 5 %');
});

test('runs view GEMM rows say where the rotation was padded or skipped and when the stats are simulated', () => {
  const store = new RunStore();
  const hadamard = { ...baseConfig, gemms: { ...baseConfig.gemms, dgrad: { ...baseConfig.gemms.dgrad, rotation: 'hadamard' as const, hadamardBlock: 32 as const } } };
  const layer = (name: string, out: number, dgrad: GemmRotationFit): LayerInfo => ({
    name, kind: name, block: -1, outFeatures: out, inFeatures: 64, sketchIndices: [],
    rotationFit: { fprop: { status: 'rotated', dim: 64 }, dgrad, wgrad: { status: 'rotated' } },
  });
  const layers = [layer('mix', 64, { status: 'rotated', dim: 64 }), layer('lm_head', 82, { status: 'padded', dim: 82, paddedTo: 96 }), layer('odd', 90, { status: 'skipped', dim: 90 })];
  store.ingest({ type: 'runStarted', runId: 'r', name: 'gpt', startedAt: 't', trainer: { name: 'x', version: '1' }, config: hadamard, layers });
  const operand = { blocks: 0, elements: 0, histogram: { minExp: 0, counts: [], nanBlocks: 0 }, saturatedFrac: 0, flushedFrac: 0, sqnrDb: null };
  store.ingest({ type: 'layerStats', runId: 'r', step: 0, layer: 'mix', gemm: 'dgrad', precision: 'bf16', simulated: true, operands: [{ operand: 'dy', ...operand }, { operand: 'w', ...operand }] });
  const rows = configRows(store.list()[0]!, store.get('r'));
  assert.deepEqual(rows.find((r) => r.label === 'dgrad'), { label: 'dgrad', value: 'mxfp4 · hadamard 32 · nearest-even · padded in 1 of 3 layers, skipped in 1 of 3 layers · MXFP4 simulated (GEMM ran bf16)' });
  assert.deepEqual(rows.find((r) => r.label === 'fprop'), { label: 'fprop', value: 'mxfp4 · no rotation · nearest-even' }, 'nothing to add where every layer fits and the GEMM was emulated');
  assert.match(runInfo(store.get('r')!, null).gemms.dgrad, / · padded in 1 of 3 layers, skipped in 1 of 3 layers · MXFP4 simulated \(GEMM ran bf16\)$/, 'the dashboard run chip says the same');
});

test('a simulated GEMM is labelled with the block format its stats declare (NVFP4, MXFP8), MXFP4 when absent', () => {
  const operand = { blocks: 0, elements: 0, histogram: { minExp: 0, counts: [], nanBlocks: 0 }, saturatedFrac: 0, flushedFrac: 0, sqnrDb: null };
  const record = (format: 'nvfp4' | 'mxfp8-e5m2' | undefined): LayerStatsRecord => ({
    type: 'layerStats', runId: 'r', step: 0, layer: 'mix', gemm: 'dgrad', precision: 'bf16', simulated: true,
    operands: [{ operand: 'dy', ...operand, ...(format && { format }) }, { operand: 'w', ...operand }],
  });
  assert.equal(simulatedNote([record('nvfp4')]), 'NVFP4 simulated (GEMM ran bf16)');
  assert.equal(simulatedNote([record('mxfp8-e5m2')]), 'MXFP8 simulated (GEMM ran bf16)');
  assert.equal(simulatedNote([record(undefined)]), 'MXFP4 simulated (GEMM ran bf16)');
  assert.equal(simulatedNote([{ ...record('nvfp4'), simulated: false }]), '', 'an emulated GEMM gets no note');
});

test('status bar text and quick actions follow the connection state', () => {
  assert.match(statusText({ state: undefined, url: undefined, run: undefined, nextRunConfig: undefined }).text, /debug-disconnect\) MX Scope$/);
  const store = new RunStore();
  store.ingest({ type: 'runStarted', runId: 'r', name: 'tiny', startedAt: 't', trainer: { name: 'x', version: '1' }, config: baseConfig, layers: [] });
  const starting = statusText({ state: 'connected', url: 'ws://x', run: store.list()[0], nextRunConfig: baseConfig });
  assert.equal(starting.text, '$(plug) MX Scope: tiny · starting · F,D,W mxfp4', 'no "step -1 · loss —" before the first step');
  store.ingest({ type: 'step', runId: 'r', step: 3, tokens: 1, loss: 2, lr: 1, gradNorm: 1, stepMs: 1 });
  const live = statusText({ state: 'connected', url: 'ws://x', run: store.list()[0], nextRunConfig: baseConfig });
  assert.equal(live.text, '$(plug) MX Scope: tiny · step 3 · loss 2.0000 · F,D,W mxfp4');
  store.ingest({ type: 'runEnded', runId: 'r', step: 4, status: 'diverged', reason: 'loss is not finite', endedAt: 't' });
  const diverged = statusText({ state: 'connected', url: 'ws://x', run: store.list()[0], nextRunConfig: baseConfig });
  assert.equal(diverged.text, '$(plug) MX Scope: $(error) tiny diverged at step 4 · F,D,W mxfp4', 'a diverged run is not "idle"');
  assert.deepEqual(quickActions(undefined, false).slice(0, 2).map((a) => a.command), ['mxscope.startEmulatedRun', 'mxscope.connect']);
  const running = quickActions('connected', true).map((a) => a.command);
  assert.ok(running.includes('mxscope.stopRun') && !running.includes('mxscope.startNextRun') && running.includes('mxscope.disconnect'));
});

test('the Runs view and status bar show the production recipes: NVFP4 tiles, MXFP8 and the scale rule', () => {
  const store = new RunStore();
  const gemms = {
    fprop: { ...baseConfig.gemms.fprop, precision: 'nvfp4' as const, nvfp4Weight2d: true },
    dgrad: { ...baseConfig.gemms.dgrad, precision: 'mxfp8' as const, scaleRule: 'rceil' as const },
    wgrad: { ...baseConfig.gemms.wgrad, precision: 'mxfp4' as const, rotation: 'fixed-sign-hadamard' as const, hadamardBlock: 16 as const, scaleRule: 'even' as const },
  };
  store.ingest({ type: 'runStarted', runId: 'recipes', name: 'a rather long name for the production recipes', startedAt: '2026-11-24T03:10:00.000Z', trainer: { name: 'x', version: '1' }, config: { ...baseConfig, gemms }, layers: [] });
  const rows = configRows(store.list()[0]!);
  assert.equal(rows.find((r) => r.label === 'fprop')!.value, 'nvfp4 · no rotation · nearest-even · weights in 16×16 tiles');
  assert.equal(rows.find((r) => r.label === 'dgrad')!.value, 'mxfp8 · no rotation · nearest-even · scale rule rceil');
  assert.equal(rows.find((r) => r.label === 'wgrad')!.value, 'mxfp4 · fixed-sign-hadamard 16 · nearest-even · scale rule even');
  assert.equal(runRow(store.list()[0]!).label, 'tiny · F nvfp4 · 2D · D mxfp8 · rceil · W mxfp4 · FSH16 · even · 03:10');
});

test('a failed command shows the reason without the protocol error code', () => {
  assert.equal(userMessage(new Error('no run is active: start one before saving a checkpoint [no-active-run]')), 'no run is active: start one before saving a checkpoint');
  assert.equal(userMessage(new Error('could not connect to ws://x: connect ECONNREFUSED 127.0.0.1:1')), 'could not connect to ws://x: connect ECONNREFUSED 127.0.0.1:1');
});

test('two checkpoints with the same file name get labels that tell them apart', () => {
  assert.deepEqual(distinctNames('/runs/a/model.safetensors', '/runs/b/model.safetensors'), ['a/model.safetensors', 'b/model.safetensors']);
  assert.deepEqual(distinctNames('/x/step-100.safetensors', '/x/step-200.safetensors'), ['step-100.safetensors', 'step-200.safetensors']);
  assert.deepEqual(distinctNames('/x/m.safetensors', '/x/m.safetensors'), ['x/m.safetensors', 'x/m.safetensors (same file)']);
});

// A divergence tells which layer moved first: the loss-spike and divergence alerts name the first
// layer and GEMM whose metrics left their running range in the stats steps before the event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DepartureTracker } from '../../src/dashboard/departures.js';
import { NoticeFilter } from '../../src/dashboard/notice.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import type { LayerStatsRecord } from '../../src/protocol/telemetry.js';

const run = { runId: 'r', blocks: 3, steps: 300, statsEvery: 10, evalEvery: 0, sketchSize: 16, rotation: 'none' as const, seed: 4 };

test('the divergence alert names the layer and GEMM that left its running range first', () => {
  const tracker = new AlertTracker();
  for (const record of syntheticRun({ ...run, divergeAt: { step: 214, layer: 'blocks.1.attn.v', lead: 14 } })) tracker.ingest(record);
  const loud = tracker.alerts.filter((a) => a.kind === 'divergence' || a.kind === 'loss-spike');
  assert.ok(loud.length >= 1, 'the event raised an alert');
  for (const alert of loud) {
    assert.equal(alert.step, 214);
    assert.equal(alert.layer, 'blocks.1.attn.v', alert.message);
    assert.equal(alert.gemm, 'fprop', 'fprop is the first GEMM of the layer whose flush grew at step 200');
    assert.match(alert.message, /First out of its running range: blocks\.1\.attn\.v \(fprop\): flushed % [\d.]+ against a running [\d.]+ at step 200/);
  }
});

test('with layer groups the look-back spans three of a layer\'s stats intervals, not three stats steps', () => {
  // Steady stats through step 190, then one layer's Wgrad error jumps at step 200 and the loss turns NaN at 239.
  const steady = [...syntheticRun(run)].filter((record) => record.type !== 'runEnded' && (!('step' in record) || record.step < 200));
  const before = steady.find((r): r is LayerStatsRecord => r.type === 'layerStats' && r.step === 190 && r.layer === 'blocks.1.attn.v' && r.gemm === 'wgrad')!;
  const jump: LayerStatsRecord = { ...before, step: 200, wgradError: { ...before.wgradError!, relErr: before.wgradError!.relErr! * 10, errNorm: before.wgradError!.errNorm * 10 } };
  const divergence = (groups: number, scope?: 'rank', rowStride?: number) => {
    const tracker = new AlertTracker();
    for (const record of steady) tracker.ingest(record.type === 'runStarted' ? { ...record, config: { ...record.config, statsLayerGroups: groups, wgradErrorScope: scope, wgradErrorRowStride: rowStride } } : record);
    tracker.ingest(jump);
    tracker.ingest({ type: 'step', runId: 'r', step: 239, tokens: 1, loss: null, lr: 1, gradNorm: 1, stepMs: 1 });
    return tracker.alerts.find((a) => a.kind === 'divergence')!;
  };
  assert.equal(divergence(1).layer, null, 'step 200 is more than three stats steps (30) before 239');
  assert.equal(divergence(4).layer, 'blocks.1.attn.v', 'a layer reporting every 40 steps is looked back at over 120');
  assert.match(divergence(4).message, /Wgrad relative error [\d.]+ against a running [\d.]+ at step 200\.$/);
  assert.match(divergence(4, 'rank').message, /at step 200 \(Wgrad error: each rank's own, mean over ranks\)\.$/, 'a per-rank run says whose Wgrad error left its range');
  assert.match(divergence(4, undefined, 4).message, /at step 200 \(Wgrad error: estimated from 1 in 4 rows\)\.$/, 'a sampled run says its Wgrad error is an estimate');
});

test('a loss event with steady layers says no layer moved', () => {
  const tracker = new AlertTracker();
  for (const record of syntheticRun(run)) tracker.ingest(record);
  tracker.ingest({ type: 'step', runId: 'r', step: 300, tokens: 1, loss: null, lr: 1, gradNorm: 1, stepMs: 1 });
  const divergence = tracker.alerts.find((a) => a.kind === 'divergence')!;
  assert.equal(divergence.layer, null);
  assert.match(divergence.message, /No layer left its running range/);
});

test('departures: a steady metric never departs; a jump does once, and the range is not widened by it', () => {
  const departures = new DepartureTracker();
  const record = (step: number, relErr: number) => ({
    type: 'layerStats' as const, runId: 'r', step, layer: 'l', gemm: 'wgrad' as const, precision: 'mxfp4' as const,
    operands: [], wgradError: { gradNorm: 1, errNorm: relErr, relErr, cosErrGrad: 0, alignment: 1, gradToErr: 1 / relErr, lag1Cos: null, sketch: [], sketchPrev: null },
  });
  for (let step = 0; step < 100; step += 10) departures.observe(record(step, 0.2 + 0.001 * Math.sin(step)));
  assert.equal(departures.first(0, 100), undefined);
  departures.observe(record(100, 0.5));
  departures.observe(record(110, 0.55));
  assert.deepEqual({ ...departures.first(0, 200)!, value: 0 }, { step: 100, layer: 'l', gemm: 'wgrad', metric: 'Wgrad relative error', gridMetric: 'wgradRelErr', value: 0, mean: departures.first(0, 200)!.mean });
  assert.ok(departures.first(0, 200)!.mean < 0.21, 'the running mean did not chase the excursion');
  assert.equal(departures.first(101, 200), undefined, 'one departure per excursion');
});

test('a live divergence notifies once per run and kind, with a focus on the step, layer, GEMM and metric', () => {
  const notices = new NoticeFilter();
  const alert = { runId: 'r', kind: 'divergence' as const, step: 24, layer: 'blocks.1.attn.v', gemm: 'fprop' as const, metric: 'flushedPct' as const, message: 'x' };
  const notice = notices.notice(alert, 'tiny · RHT32')!;
  assert.equal(notice.severity, 'error');
  assert.equal(notice.message, 'MX Scope: tiny · RHT32 diverged at step 24; first to move: blocks.1.attn.v (fprop).');
  assert.deepEqual(notice.focus, { type: 'focus', mode: 'single', runIds: ['r'], at: { step: 24, layer: 'blocks.1.attn.v', gemm: 'fprop', metric: 'flushedPct' } });
  assert.equal(notices.notice(alert, 'tiny · RHT32'), null, 'once per run and kind');
  assert.equal(notices.notice({ ...alert, kind: 'nan-scales' }, 'x'), null, 'layer alerts stay in the Alerts tab');
  notices.reset('r');
  assert.ok(notices.notice(alert, 'tiny · RHT32'), 'a restarted run may notify again');
});

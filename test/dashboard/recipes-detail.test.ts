// The scale view's data for NVFP4 layers: the host declares the E4M3 histogram kind, and bins are
// labelled in the scale's own units (E4M3 values), E8M0 ones as exponents.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema } from '../../src/protocol/webview.js';
import { scaleBinLabel, scaleValueOf, type TelemetryRecord } from '../../src/protocol/telemetry.js';
import { decodeFp8 } from '../../src/mx/index.js';
import { RunStore } from '../../src/store/run-store.js';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed } from '../../src/dashboard/feed.js';
import { Trainer } from '../../src/trainer/trainer.js';
import { microConfig } from '../trainer/micro.js';

function feedOf(records: TelemetryRecord[]): DashboardFeed {
  const store = new RunStore();
  for (const record of records) store.ingest(record);
  return new DashboardFeed(store, new AlertTracker());
}

test('layer detail of an NVFP4 GEMM declares E4M3 scale codes; an MXFP8 one stays E8M0', () => {
  const trainer = new Trainer(microConfig({ fprop: { precision: 'nvfp4' }, dgrad: { precision: 'mxfp8' } }), 'nv');
  // The store keeps layer stats only for layers its run declared, so the run starts first.
  const records: TelemetryRecord[] = [
    { type: 'runStarted', runId: 'nv', name: 'nv', startedAt: '2026-11-24T04:00:00.000Z', trainer: { name: 'test', version: '0' }, config: trainer.config, layers: trainer.model.layerInfos() },
  ];
  for (let i = 0; i < 3; i++) trainer.step((record) => records.push(record));
  const feed = feedOf(records);
  const layer = trainer.model.layerInfos()[0]!.name;
  const nvfp4 = feed.layerDetail({ type: 'requestLayer', requestId: 1, runId: 'nv', layer, gemm: 'fprop', operand: 'w', lag: 1 })!;
  check(hostToWebviewSchema, JSON.parse(JSON.stringify(nvfp4)));
  assert.equal(nvfp4.scaleKind, 'e4m3');
  assert.ok(nvfp4.minExp >= 0 && nvfp4.minExp + nvfp4.exponents - 1 === 126, `codes ${nvfp4.minExp}…${nvfp4.minExp + nvfp4.exponents - 1}: the largest block scale is 448`);
  const mxfp8 = feed.layerDetail({ type: 'requestLayer', requestId: 2, runId: 'nv', layer, gemm: 'dgrad', operand: 'dy', lag: 1 })!;
  assert.equal(mxfp8.scaleKind, undefined);
  assert.ok(mxfp8.minExp < 0, 'gradients have negative E8M0 exponents');
});

test('bins are labelled in the scale units: every E4M3 code by its value, E8M0 by its exponent', () => {
  for (let code = 0; code < 127; code++) assert.equal(scaleValueOf('e4m3', code), decodeFp8(code, 'e4m3'), `code ${code}`);
  assert.equal(scaleBinLabel('e4m3', 126), '448');
  assert.equal(scaleBinLabel('e4m3', 56), '1');
  assert.equal(scaleBinLabel('e4m3', 1), '0.00195');
  assert.equal(scaleBinLabel(undefined, -3), '-3');
  assert.equal(scaleValueOf('e8m0', -3), 0.125);
});

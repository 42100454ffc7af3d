import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed } from '../../src/dashboard/feed.js';
import { DashboardSession } from '../../src/dashboard/session.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import type { HostToWebview } from '../../src/protocol/webview.js';
import type { TelemetryRecord } from '../../src/protocol/telemetry.js';
import { RunStore } from '../../src/store/run-store.js';

const records: TelemetryRecord[] = [...syntheticRun({ runId: 'a', blocks: 1, steps: 30, statsEvery: 10, evalEvery: 10, sketchSize: 8, rotation: 'none', seed: 1 })];

function setup() {
  mock.timers.enable({ apis: ['setTimeout'] });
  const store = new RunStore();
  const feed = new DashboardFeed(store, new AlertTracker());
  const sent: HostToWebview[] = [];
  const logged: string[] = [];
  const state = { visible: true };
  const opened: unknown[] = [];
  const session = new DashboardSession(feed, {
    post: (message) => sent.push(message),
    visible: () => state.visible,
    log: (line) => logged.push(line),
    exportFile: () => {},
    openDashboard: (focus) => opened.push(focus),
  });
  const ingest = (from: number, to: number) => {
    for (const record of records.slice(from, to)) {
      store.ingest(record);
      session.storeChanged();
    }
  };
  return { session, sent, logged, state, ingest, opened, types: () => sent.map((m) => m.type) };
}

test('openDashboard opens the panel, at the focus a sidebar alert sends; a bad focus is refused', () => {
  const { session, opened, logged } = setup();
  session.receive({ type: 'openDashboard' });
  const focus = { type: 'focus', mode: 'single', runIds: ['a'], at: { step: 20, layer: 'blocks.0.attn.q', gemm: 'wgrad' } };
  session.receive({ type: 'openDashboard', focus });
  session.receive({ type: 'openDashboard', focus: { ...focus, runIds: 'a' } });
  assert.deepEqual(opened, [undefined, focus]);
  assert.match(logged.join('\n'), /runIds/, 'the malformed focus is named in the log');
  mock.timers.reset();
});

test('ready gets a snapshot; store changes become one batched delta', (t) => {
  t.after(() => mock.timers.reset());
  const { session, ingest, types, sent } = setup();
  ingest(0, 20);
  assert.deepEqual(types(), [], 'nothing before ready');
  session.receive({ type: 'ready' });
  assert.deepEqual(types(), ['snapshot']);
  ingest(20, 40);
  assert.deepEqual(types(), ['snapshot'], 'batched, not per record');
  mock.timers.tick(250);
  assert.deepEqual(types(), ['snapshot', 'delta']);
  const delta = sent[1]!;
  assert.ok(delta.type === 'delta' && delta.loss[0]!.step.length > 0);
});

test('hidden: nothing is sent; shown again: resynced by ready or by the timer', (t) => {
  t.after(() => mock.timers.reset());
  const { session, ingest, types, state } = setup();
  session.receive({ type: 'ready' });
  state.visible = false;
  session.visibilityChanged();
  ingest(0, 40);
  mock.timers.tick(5000);
  assert.deepEqual(types(), ['snapshot']);
  state.visible = true;
  session.visibilityChanged();
  session.visibilityChanged(); // a view-state event that is not a visibility change
  mock.timers.tick(999);
  assert.deepEqual(types(), ['snapshot']);
  mock.timers.tick(1);
  assert.deepEqual(types(), ['snapshot', 'snapshot'], 'a page that kept its state is resynced');
  state.visible = false;
  session.visibilityChanged();
  state.visible = true;
  session.visibilityChanged();
  session.receive({ type: 'ready' }); // a reloaded page says ready first
  mock.timers.tick(2000);
  assert.deepEqual(types(), ['snapshot', 'snapshot', 'snapshot']);
});

test('focus waits for the snapshot; malformed messages are logged and ignored', (t) => {
  t.after(() => mock.timers.reset());
  const { session, types, logged } = setup();
  session.focus({ type: 'focus', mode: 'compare', runIds: ['a', 'b'] });
  assert.deepEqual(types(), []);
  session.receive({ type: 'ready' });
  assert.deepEqual(types(), ['snapshot', 'focus']);
  session.receive({ type: 'requestLayer', runId: 'a' });
  assert.equal(types().length, 2);
  assert.match(logged[0]!, /malformed webview message: \.requestId/);
});

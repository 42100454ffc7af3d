// The host never holds or sends more than the dashboard webview accepts: alerts live in a ring, a
// trainer's long reasons are clipped, and a snapshot after any accepted input still validates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { check } from '../../src/protocol/validate.js';
import { hostToWebviewSchema, WEBVIEW_LIMITS } from '../../src/protocol/webview.js';
import { RunStore } from '../../src/store/run-store.js';
import { AlertTracker, MAX_ALERTS } from '../../src/dashboard/alerts.js';
import { DashboardFeed } from '../../src/dashboard/feed.js';
import { forEachStatsRecord, syntheticRunStarted, syntheticStep } from '../fixtures/synthetic-llama8b.js';

function wired(): { store: RunStore; alerts: AlertTracker; feed: DashboardFeed } {
  const store = new RunStore();
  const alerts = new AlertTracker();
  store.onDidChange((change) => change.record && alerts.ingest(change.record));
  return { store, alerts, feed: new DashboardFeed(store, alerts) };
}

test(`alerts are a ring of ${MAX_ALERTS}: 100,001 alerts later a snapshot still validates and deltas stay in step`, () => {
  const { store, alerts, feed } = wired();
  store.ingest(syntheticRunStarted('r', 0, 1));
  const { cursor } = feed.snapshot();
  // Each run diverges once: one alert per runEnded (fed to the tracker alone, the store keeps 32 runs).
  const diverge = (i: number) => alerts.ingest({ type: 'runEnded', runId: `run-${i}`, step: i, status: 'diverged', reason: 'loss is not finite', endedAt: '2026-11-21T16:41:02.120Z' });
  for (let i = 0; i < 100_001; i++) diverge(i);
  assert.equal(alerts.alerts.length, MAX_ALERTS);
  assert.equal(alerts.alerts.at(-1)!.runId, 'run-100000');
  const { message } = feed.snapshot();
  check(hostToWebviewSchema, message);
  assert.equal(message.alerts.length, MAX_ALERTS);
  assert.ok(MAX_ALERTS <= WEBVIEW_LIMITS.alerts);
  const delta = feed.delta(cursor)!;
  assert.equal(delta.alerts.length, MAX_ALERTS, 'a webview far behind gets the newest alerts, not all of them');
  assert.equal(delta.alerts[0]!.runId, `run-${100_001 - MAX_ALERTS}`);
  check(hostToWebviewSchema, delta);
  diverge(100_001);
  const next = feed.delta(cursor)!;
  assert.deepEqual(next.alerts.map((a) => a.runId), ['run-100001'], 'then exactly the new one');
});

test('a diverged run with a 4096-character reason makes an alert the webview accepts', () => {
  const { store, feed } = wired();
  store.ingest(syntheticRunStarted('long', 10, 1));
  store.ingest({ type: 'runEnded', runId: 'long', step: 3, status: 'diverged', reason: 'x'.repeat(4096), endedAt: '2026-11-21T16:41:02.120Z' });
  const { message } = feed.snapshot();
  check(hostToWebviewSchema, message);
  assert.equal(message.alerts.length, 1);
  assert.ok(message.alerts[0]!.message.length < 1100, `alert message of ${message.alerts[0]!.message.length} characters`);
  assert.equal(message.runs[0]!.divergedAt, 3);
});

test('a run\'s telemetry cost reaches the webview while its step times allow one, and nothing invalid when they do not', () => {
  for (const [statsMs, want] of [[1800, 1 / 10], [Number.MAX_VALUE, undefined]] as const) {
    const { store, feed } = wired();
    const started = syntheticRunStarted('r', 100, 10);
    store.ingest(started);
    for (let step = 0; step <= 40; step++) {
      store.ingest({ ...syntheticStep('r', step), stepMs: step % 10 === 0 ? statsMs : 900 });
      if (step % 10 === 0) forEachStatsRecord('r', step, started.layers.slice(0, 1), (record) => store.ingest(record));
    }
    const { message } = feed.snapshot();
    check(hostToWebviewSchema, message);
    const cost = message.runs[0]!.telemetryCost;
    if (want === undefined) assert.equal(cost, undefined, 'stats steps of Number.MAX_VALUE ms: no finite cost');
    else assert.ok(Math.abs(cost! - want) < 1e-12, `stats steps 900 ms longer every 10 steps of 900: +10 %, got ${cost}`);
  }
});

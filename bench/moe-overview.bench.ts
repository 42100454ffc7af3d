// The dashboard on a very large mixture-of-experts run: 58 blocks of 256 experts (two projections
// each) plus attention, 29,928 layers, then the 224-layer dense run for comparison. Per run: the
// host's time to build a stats-step delta and a snapshot, the same plus serialising them as VS Code's
// webview.postMessage does (JSON, typed arrays passed beside it as bytes), the bytes posted, and the
// page's work to apply the message (JSON.parse, validation, DashboardData); and the Layer heatmap's
// grid, which a shown heatmap asks for again after each stats step (build, JSON, bytes). Medians of
// ROUNDS, each after one more stats step is ingested. It uses only the feed, the store, the page's data model and
// the schema, so the same file measures an older revision checked out beside this one.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { AlertTracker } from '../src/dashboard/alerts.js';
import { DashboardFeed } from '../src/dashboard/feed.js';
import { layerGrid } from '../src/dashboard/layer-grid.js';
import type { GemmKind } from '../src/protocol/config.js';
import type { GridMetric } from '../src/protocol/layer-metrics.js';
import { check } from '../src/protocol/validate.js';
import { hostToWebviewSchema, type DeltaMessage, type SnapshotMessage } from '../src/protocol/webview.js';
import { RunStore } from '../src/store/run-store.js';
import { DashboardData } from '../webview/dashboard/data.js';
import { syntheticRun } from '../test/fixtures/synthetic-run.js';
import { deserialise, postedBytes, serialise, type Posted } from '../test/fixtures/webview-post.js';
import type { TelemetryRecord } from '../src/protocol/telemetry.js';
import { median } from './timing.js';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const STATS_EVERY = 10;
const WARM_STATS_STEPS = 3;

interface Shape {
  label: string;
  blocks: number;
  experts?: number;
}

const SHAPES: Shape[] = [
  { label: '29,928 layers (58 blocks × 256 experts × 2 + attention)', blocks: 58, experts: 256 },
  { label: '224 layers (32 dense blocks)', blocks: 32 },
];

/** The message as the page receives it from postMessage, validated. */
function received(posted: Posted): SnapshotMessage & DeltaMessage {
  return check(hostToWebviewSchema, deserialise(posted)) as SnapshotMessage & DeltaMessage;
}

function timed<T>(fn: () => T): { value: T; ms: number } {
  const t0 = performance.now();
  const value = fn();
  return { value, ms: performance.now() - t0 };
}

interface Sample {
  build: number;
  serialise: number;
  bytes: number;
  apply: number;
}

/** Heatmap grids asked for: the Wgrad error (a headline field) and the scale shift (histograms, and the record before). */
const GRIDS: [GridMetric, GemmKind][] = [
  ['wgradRelErr', 'wgrad'],
  ['scaleShift', 'dgrad'],
];

function summary(label: string, samples: Sample[]): void {
  const pick = (f: (s: Sample) => number) => samples.map(f);
  const range = (values: number[]) => `${Math.min(...values).toFixed(1)} / ${median(values).toFixed(1)} / ${Math.max(...values).toFixed(1)}`;
  console.log(`  ${label.padEnd(20)} build ${range(pick((s) => s.build))} ms, + serialise ${range(pick((s) => s.build + s.serialise))} ms, ${(median(pick((s) => s.bytes)) / 1024).toFixed(1)} KiB posted, page applies in ${range(pick((s) => s.apply))} ms (min / median / max of ${samples.length})`);
}

function measure(shape: Shape): void {
  const steps = STATS_EVERY * (WARM_STATS_STEPS + ROUNDS) + 1;
  const records = syntheticRun({ runId: 'moe', blocks: shape.blocks, experts: shape.experts, steps, statsEvery: STATS_EVERY, evalEvery: 0, sketchSize: 16, rotation: 'hadamard', seed: 11 })[Symbol.iterator]();
  const store = new RunStore({ statsPerSeries: 64, stepsPerRun: 20_000 });
  const alerts = new AlertTracker();
  store.onDidChange((change) => change.record && alerts.ingest(change.record));
  const feed = new DashboardFeed(store, alerts);
  let pending: TelemetryRecord | undefined;
  /** Ingests up to (not including) the step record `until`. */
  const ingestTo = (until: number) => {
    for (;;) {
      const record = pending ?? records.next().value;
      pending = undefined;
      if (!record || record.type === 'runEnded') return;
      if (record.type === 'step' && record.step >= until) {
        pending = record;
        return;
      }
      store.ingest(record);
    }
  };
  ingestTo(STATS_EVERY * WARM_STATS_STEPS);
  const page = new DashboardData();
  const first = feed.snapshot();
  page.applySnapshot(received(serialise(first.message)));
  const cursor = first.cursor;
  const deltas: Sample[] = [];
  const snapshots: Sample[] = [];
  const grids = GRIDS.map(() => [] as { build: number; serialise: number; bytes: number }[]);
  for (let round = 0; round < ROUNDS; round++) {
    ingestTo(STATS_EVERY * (WARM_STATS_STEPS + round) + 1); // one more stats step, whole
    globalThis.gc?.();
    const delta = timed(() => feed.delta(cursor)!);
    const posted = timed(() => serialise(delta.value));
    const apply = timed(() => page.applyDelta(received(posted.value)));
    deltas.push({ build: delta.ms, serialise: posted.ms, bytes: postedBytes(posted.value), apply: apply.ms });
    globalThis.gc?.();
    const snapshot = timed(() => feed.snapshot());
    const postedSnapshot = timed(() => serialise(snapshot.value.message));
    const fresh = new DashboardData();
    const applySnapshot = timed(() => fresh.applySnapshot(received(postedSnapshot.value)));
    snapshots.push({ build: snapshot.ms, serialise: postedSnapshot.ms, bytes: postedBytes(postedSnapshot.value), apply: applySnapshot.ms });
    GRIDS.forEach(([metric, gemm], i) => {
      const grid = timed(() => layerGrid(store.get('moe')!, { type: 'requestLayerGrid', requestId: round, runId: 'moe', metric, gemm }));
      const json = timed(() => JSON.stringify(grid.value));
      grids[i]!.push({ build: grid.ms, serialise: json.ms, bytes: json.value.length });
    });
  }
  console.log(`${shape.label}, load ${loadavg()[0]!.toFixed(2)}`);
  summary('stats-step delta', deltas);
  summary('snapshot', snapshots);
  GRIDS.forEach(([metric, gemm], i) => {
    const samples = grids[i]!;
    const range = (values: number[]) => `${Math.min(...values).toFixed(1)} / ${median(values).toFixed(1)} / ${Math.max(...values).toFixed(1)}`;
    console.log(`  heatmap ${`${metric} ${gemm}`.padEnd(20)} build ${range(samples.map((s) => s.build))} ms, + JSON ${range(samples.map((s) => s.build + s.serialise))} ms, ${(median(samples.map((s) => s.bytes)) / 1024).toFixed(1)} KiB`);
  });
}

console.log(`Node ${process.version}, ${ROUNDS} stats steps each after ${WARM_STATS_STEPS} ingested first`);
for (const shape of SHAPES) measure(shape);

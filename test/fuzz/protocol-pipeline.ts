// Fuzzing the protocol pipeline as the extension host runs it: readFrame → RunStore → alerts →
// dashboard feed → the webview's schema. Mutated server frames (from the conformance corpus and a
// synthetic run) go in; what must hold: nothing throws, every snapshot, delta and layer detail the
// host makes from what it accepted passes hostToWebviewSchema, and no input takes long.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFrame } from '../../src/link/frames.js';
import { MAX_SERVER_FRAME_BYTES } from '../../src/link/trainer-client.js';
import { check, GEMM_OPERANDS, SERVER_MESSAGE_TYPES, serverMessageSchema, tryCheck, TELEMETRY_TYPES, type GemmKind, type TelemetryRecord } from '../../src/protocol/index.js';
import { hostToWebviewSchema, type HostToWebview } from '../../src/protocol/webview.js';
import { delivered } from '../fixtures/webview-post.js';
import { RunStore } from '../../src/store/run-store.js';
import { AlertTracker } from '../../src/dashboard/alerts.js';
import { DashboardFeed, type FeedCursor } from '../../src/dashboard/feed.js';
import { CORPUS_DIR, CORPUS_FILES, type MessageCase } from '../conformance/generate.js';
import { syntheticRun } from '../fixtures/synthetic-run.js';
import { Fuzzer, type Json } from './mutate.js';

export interface FuzzFigures {
  cases: number;
  accepted: number;
  refusedByReader: number;
  refusedByStore: number;
  /** Exceptions that escaped a stage, with the seed and case index to reproduce them. */
  crashes: string[];
  /** Host outputs the webview schema refused. */
  webviewRejections: string[];
  maxMs: number;
  totalMs: number;
}

function seedFrames(): Json[] {
  const corpus = JSON.parse(readFileSync(join(CORPUS_DIR, CORPUS_FILES.server), 'utf8')) as MessageCase[];
  const valid = corpus.filter((c) => c.expect === 'valid').map((c) => c.message as Json);
  let seq = 1;
  const run = [...syntheticRun({ runId: 'fuzz', blocks: 1, steps: 30, statsEvery: 10, evalEvery: 10, sketchSize: 8, rotation: 'hadamard', seed: 3 })].map((record) => ({ seq: seq++, ...record }) as unknown as Json);
  return [...valid, ...run];
}

/** Runs `cases` mutated frames with `seed`; checks webview messages every `checkEvery` cases. */
export function fuzzProtocolPipeline(seed: number, cases: number, checkEvery = 50): FuzzFigures {
  const fuzz = new Fuzzer(seed);
  const seeds = seedFrames();
  const store = new RunStore({ runs: 8 });
  const alerts = new AlertTracker();
  store.onDidChange((change) => change.record && alerts.ingest(change.record));
  const feed = new DashboardFeed(store, alerts);
  let cursor: FeedCursor = feed.snapshot().cursor;
  const figures: FuzzFigures = { cases, accepted: 0, refusedByReader: 0, refusedByStore: 0, crashes: [], webviewRejections: [], maxMs: 0, totalMs: 0 };
  const toWebview = (what: string, message: HostToWebview, i: number) => {
    const checked = tryCheck(hostToWebviewSchema, delivered(message));
    if (!checked.ok) figures.webviewRejections.push(`seed ${seed} case ${i}: ${what}: ${checked.error.message}`);
  };
  // Start from valid runs, so mutated records find runs and layers to land in.
  for (const frame of seeds) if (tryCheck(serverMessageSchema, frame).ok && TELEMETRY_TYPES.includes((frame as { type: TelemetryRecord['type'] }).type)) store.ingest(frame as unknown as TelemetryRecord);

  for (let i = 0; i < cases; i++) {
    const base = fuzz.pick(seeds);
    const mutated = fuzz.chance(0.1) ? base : fuzz.mutate(base);
    const started = performance.now();
    let stage = 'readFrame';
    try {
      const frame = readFrame(Buffer.from(fuzz.text(mutated)), false, serverMessageSchema, SERVER_MESSAGE_TYPES, MAX_SERVER_FRAME_BYTES);
      if (frame.kind !== 'message') figures.refusedByReader++;
      else if (TELEMETRY_TYPES.includes(frame.message.type as TelemetryRecord['type'])) {
        stage = 'store';
        if (store.ingest(frame.message as TelemetryRecord) === undefined) figures.accepted++;
        else figures.refusedByStore++;
      }
      if (i % checkEvery === checkEvery - 1) {
        stage = 'feed';
        const delta = feed.delta(cursor);
        if (delta) toWebview('delta', delta, i);
        else {
          const snapshot = feed.snapshot();
          cursor = snapshot.cursor;
          toWebview('snapshot', snapshot.message, i);
        }
        stage = 'layerDetail';
        for (const summary of store.list()) {
          const run = store.get(summary.runId)!;
          const key = run.seriesKeys()[0];
          if (!key) continue;
          const gemm = key.slice(key.lastIndexOf('/') + 1) as GemmKind;
          const detail = feed.layerDetail({ type: 'requestLayer', requestId: i, runId: summary.runId, layer: key.slice(0, key.lastIndexOf('/')), gemm, operand: GEMM_OPERANDS[gemm][fuzz.int(2)]!, lag: 1 + fuzz.int(4) });
          if (detail) toWebview('layerDetail', detail, i);
        }
      }
    } catch (error) {
      figures.crashes.push(`seed ${seed} case ${i} (${stage}): ${(error as Error).stack?.split('\n').slice(0, 3).join(' ') ?? String(error)}`);
    }
    const ms = performance.now() - started;
    figures.totalMs += ms;
    figures.maxMs = Math.max(figures.maxMs, ms);
  }
  check(hostToWebviewSchema, delivered(feed.snapshot().message));
  return figures;
}

// One training run: model, data, optimizer, telemetry and the run log, driven step by step so the
// event loop (a websocket server in the same process) stays responsive between steps.
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { check } from '../protocol/validate.js';
import { describeGemm, runConfigSchema, type RunConfig } from '../protocol/config.js';
import type { RunEndedRecord, RunStartedRecord, TelemetryRecord } from '../protocol/telemetry.js';
import { RunLogWriter } from '../runlog/writer.js';
import { Trainer } from './trainer.js';
import { layerRotationFit } from './rotation-fit.js';
import { loadCheckpoint, saveCheckpoint } from './checkpoint.js';
import { checkEmbeddedOptIns } from './stats-opt-ins.js';

export const TRAINER_INFO = { name: 'mxscope-train', version: '0.1.0' } as const;

export interface RunOptions {
  config: RunConfig;
  /** Run directories are created inside this folder. */
  outDir: string;
  name?: string;
  /** Every record in order; `json` is the record as JSON.stringify wrote it for the run log (reuse it, do not re-encode). */
  onRecord?: (record: TelemetryRecord, json?: string) => void;
  /** Aborting ends the run with status `stopped`. */
  signal?: AbortSignal;
  /** A .safetensors checkpoint (written by this trainer) to continue from. */
  resumeFrom?: string;
  /** Also write a checkpoint every this many steps (0 or absent: only at the end and on request). */
  checkpointEvery?: number;
}

export interface RunHandle {
  runId: string;
  dir: string;
  done: Promise<RunEndedRecord>;
  /** Writes a checkpoint of the current weights and optimizer state; resolves to its path. */
  saveCheckpoint(): Promise<string>;
}

export function describeRun(config: RunConfig): string {
  const { fprop, dgrad, wgrad } = config.gemms;
  return `${config.preset} · fprop ${describeGemm(fprop)} · dgrad ${describeGemm(dgrad)} · wgrad ${describeGemm(wgrad)}`;
}

function newRunId(): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

const nextTick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export function startRun(options: RunOptions): RunHandle {
  const config = check(runConfigSchema, options.config, 'config');
  checkEmbeddedOptIns(config);
  const runId = newRunId();
  const trainer = new Trainer(config, runId);
  const dir = resolve(options.outDir, runId);
  let ended: RunEndedRecord | undefined;
  let writer: RunLogWriter | undefined;
  const writes = new Set<Promise<unknown>>();
  // Each record is encoded once, for the run log and for whoever streams it (the server's frame).
  const emit = (record: TelemetryRecord): void => {
    const json = JSON.stringify(record);
    writer?.append(record, json);
    options.onRecord?.(record, json);
  };
  const checkpoint = async (before?: { step: number; reason: string }): Promise<string> => {
    if (ended !== undefined) throw new Error(`run ${runId} has ended (${ended.status}); its last checkpoint is in ${dir}`);
    // Inside a suspicious step, before its update: the weights reflect the steps before it.
    const stepsDone = before ? before.step : trainer.nextStep;
    const step = Math.max(0, stepsDone - 1);
    const write = saveCheckpoint(trainer, dir, runId, stepsDone); // snapshots the weights before it returns
    writes.add(write);
    try {
      const path = await write;
      emit({ type: 'checkpointSaved', runId, step, path, ...(before ? { reason: `before the suspicious update at step ${before.step} (${before.reason})` } : {}) });
      writer?.flush();
      return path;
    } finally {
      writes.delete(write);
    }
  };

  // A spike keeps a checkpoint from before the suspicious update ("Start Next Run from Checkpoint…"
  // offers it). Written in the background; a diverging step waits for its own (below).
  let suspicious: Promise<unknown> | undefined;
  trainer.onSuspicious = (step, reason) => {
    suspicious = checkpoint({ step, reason }).catch(() => undefined);
  };

  const done = (async (): Promise<RunEndedRecord> => {
    const started: RunStartedRecord = {
      type: 'runStarted',
      runId,
      name: options.name ?? describeRun(config),
      startedAt: new Date().toISOString(),
      trainer: { ...TRAINER_INFO },
      config,
      layers: trainer.model.layerInfos().map((info) => ({ ...info, rotationFit: layerRotationFit(info, config.gemms, trainer.model.tokens) })),
      logDir: dir,
    };
    /** Ends the run once requested checkpoints are written, so they are logged before runEnded. */
    const end = async (status: RunEndedRecord['status'], step: number, reason: string): Promise<RunEndedRecord> => {
      await Promise.allSettled([...writes]);
      ended = { type: 'runEnded', runId, step, status, reason, endedAt: new Date().toISOString() };
      if (writer) emit(ended);
      else options.onRecord?.(ended);
      return ended;
    };
    try {
      if (options.resumeFrom !== undefined) started.resumedFrom = { path: options.resumeFrom, step: await loadCheckpoint(trainer, options.resumeFrom) };
      writer = new RunLogWriter(dir, started);
      options.onRecord?.(started);
      while (trainer.nextStep < config.steps) {
        await nextTick();
        if (options.signal?.aborted) return await end('stopped', Math.max(0, trainer.nextStep - 1), 'stopped on request');
        const records: TelemetryRecord[] = [];
        const outcome = trainer.step((record) => records.push(record));
        // A diverging step's checkpoint is logged before the step: whoever reads its loss (the
        // dashboard's divergence alert) already knows where the weights from before it are.
        if (outcome.diverged !== undefined) await suspicious;
        records.forEach(emit);
        writer.flush();
        if (outcome.diverged !== undefined) return await end('diverged', outcome.step, outcome.diverged);
        if (options.checkpointEvery && (outcome.step + 1) % options.checkpointEvery === 0) await checkpoint();
      }
      await checkpoint();
      return await end('completed', config.steps - 1, `trained ${config.steps} steps`);
    } catch (error) {
      return await end('failed', Math.max(0, trainer.nextStep - 1), (error as Error).message);
    } finally {
      writer?.close();
    }
  })();
  return { runId, dir, done, saveCheckpoint: checkpoint };
}

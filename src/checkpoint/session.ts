// One checkpoint webview's work, without `vscode`: analyse one checkpoint (or compare two) when the
// page is ready, again when it asks for another rotation block, and post progress, the result or an
// error. A new request or closing the page aborts the one running; a reloaded page gets the last
// result again without recomputing it.
import { analyseCheckpoint, DEFAULT_ANALYSIS_OPTIONS } from './analysis.js';
import { openCheckpoint, type Checkpoint } from './checkpoint.js';
import { compareCheckpoints } from './compare.js';
import { sampleWorkersUnavailable, startSampleWorkers } from './sqnr-workers.js';
import type { AnalysisOptions } from '../protocol/checkpoint-report.js';
import { checkpointWebviewMessageSchema, type CheckpointHostMessage } from '../protocol/checkpoint-webview.js';
import { tryCheck } from '../protocol/validate.js';

export type SessionTarget =
  | { kind: 'analyse'; path: string }
  | { kind: 'compare'; pathA: string; pathB: string }
  /** Nothing to analyse: the page shows why. */
  | { kind: 'unavailable'; reason: string };

const PROGRESS_INTERVAL_MS = 100;
/** Above this much tensor data the first analysis is the histogram-only pass (seconds, not minutes); the page can ask for the full one. */
export const LARGE_CHECKPOINT_BYTES = 8 * 2 ** 30;

export class CheckpointSession {
  private latest: CheckpointHostMessage | undefined;
  private running: AbortController | undefined;
  private options: AnalysisOptions = { ...DEFAULT_ANALYSIS_OPTIONS };
  private chosen = false;

  constructor(
    private readonly target: SessionTarget,
    private readonly post: (message: CheckpointHostMessage) => void,
    private readonly log: (line: string) => void,
    private readonly largeBytes = LARGE_CHECKPOINT_BYTES,
  ) {
    // While the page loads: the first full analysis can then quantize its samples on them.
    if (target.kind === 'analyse') void startSampleWorkers().catch(() => undefined);
  }

  onMessage(raw: unknown): void {
    const checked = tryCheck(checkpointWebviewMessageSchema, raw);
    if (!checked.ok) {
      this.log(`checkpoint webview sent an invalid message: ${checked.error.message}`);
      return;
    }
    const message = checked.value;
    if (message.type === 'ready' && this.target.kind === 'unavailable') {
      this.send({ type: 'error', title: 'Cannot open this checkpoint', message: this.target.reason });
    } else if (message.type === 'ready') {
      if (this.latest && this.latest.type !== 'progress') this.post(this.latest);
      else if (!this.running) void this.start();
    } else if (this.target.kind === 'analyse') {
      this.options = { ...this.options, hadamardBlock: message.hadamardBlock, mode: message.mode, sqnrRows: message.sqnrRows };
      this.chosen = true;
      void this.start();
    }
  }

  dispose(): void {
    this.running?.abort();
  }

  private send(message: CheckpointHostMessage): void {
    this.latest = message;
    this.post(message);
  }

  private async start(): Promise<void> {
    this.running?.abort();
    const controller = new AbortController();
    this.running = controller;
    const opened: Checkpoint[] = [];
    const paths = this.target.kind === 'analyse' ? [this.target.path] : this.target.kind === 'compare' ? [this.target.pathA, this.target.pathB] : [];
    const title = paths.length === 1 ? `Analysing ${paths[0]}` : `Comparing ${paths[0]} with ${paths[1]}`;
    try {
      for (const path of paths) opened.push(await openCheckpoint(path));
      const bytesTotal = opened.reduce((sum, checkpoint) => sum + checkpoint.dataBytes, 0);
      if (!this.chosen && bytesTotal > this.largeBytes) this.options = { ...this.options, mode: 'histogram' };
      let lastPost = 0;
      const onProgress = (bytesDone: number) => {
        const now = Date.now();
        if (now - lastPost < PROGRESS_INTERVAL_MS || controller.signal.aborted) return;
        lastPost = now;
        this.post({ type: 'progress', title, bytesDone, bytesTotal });
      };
      this.post({ type: 'progress', title, bytesDone: 0, bytesTotal });
      const control = { signal: controller.signal, onProgress };
      const result: CheckpointHostMessage =
        opened.length === 1
          ? { type: 'report', report: await analyseCheckpoint(opened[0], this.options, control) }
          : { type: 'comparison', comparison: await compareCheckpoints(opened[0], opened[1], { chunkBytes: this.options.chunkBytes }, control) };
      if (!controller.signal.aborted) this.send(result);
      const workersDown = sampleWorkersUnavailable();
      if (workersDown) this.log(`checkpoint: ${workersDown.message}; analyses run in one thread (same results, slower)`);
    } catch (error) {
      if (controller.signal.aborted) return;
      const message = (error as Error).message;
      this.log(`checkpoint: ${message}`);
      this.send({ type: 'error', title: this.target.kind === 'analyse' ? 'Cannot analyse this checkpoint' : 'Cannot compare these checkpoints', message });
    } finally {
      await Promise.all(opened.map((checkpoint) => checkpoint.close()));
      if (this.running === controller) this.running = undefined;
    }
  }
}

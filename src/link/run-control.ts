// Run control on the trainer side: the next run's config (changed by requests, applied at the next
// start), and the one active run, started, stopped and checkpointed through the launcher.
import { mergeRunConfig, type ErrorCode, type NextRunConfig, type RunConfig, type TelemetryRecord } from '../protocol/index.js';

export interface LaunchOptions {
  config: RunConfig;
  fromCheckpoint?: string;
  /** Every record of the run, in order; `json` is the record's JSON when the launcher encoded it already (for its log). */
  onRecord: (record: TelemetryRecord, json?: string) => void;
  signal: AbortSignal;
}

/** What the server needs of a started run (the trainer's RunHandle fits). */
export interface LaunchedRun {
  runId: string;
  done: Promise<unknown>;
  saveCheckpoint(): Promise<string>;
  /**
   * The run's log directory, if it writes one with every record it emits, in emit order: replay
   * then reaches past the in-memory buffer.
   */
  dir?: string;
}

export type RunLauncher = (options: LaunchOptions) => LaunchedRun;

/** A request that cannot be done; the server answers it with an `error` of this code. */
export class RequestError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface RunControlOptions {
  baseConfig: RunConfig;
  launch: RunLauncher;
  /** How a requested change becomes the next run's config (default `mergeRunConfig`); a throw rejects the request. */
  applyChange?: (base: RunConfig, change: NextRunConfig) => RunConfig;
  log: (line: string) => void;
}

export class RunControl {
  private config: RunConfig;
  private active: { run: LaunchedRun; abort: AbortController } | undefined;

  constructor(private readonly options: RunControlOptions) {
    this.config = options.baseConfig;
  }

  get nextRunConfig(): RunConfig {
    return this.config;
  }

  /** Applies a requested change to the next run's config; an invalid change is an `invalid-message` RequestError. */
  change(change: NextRunConfig): void {
    try {
      this.config = (this.options.applyChange ?? mergeRunConfig)(this.config, change);
    } catch (error) {
      throw new RequestError('invalid-message', error instanceof Error ? error.message : String(error));
    }
  }

  /** Starts a run with the next run's config; `run-active` while one runs. */
  start(fromCheckpoint: string | undefined, onRecord: LaunchOptions['onRecord']): LaunchedRun {
    if (this.active) throw new RequestError('run-active', `run ${this.active.run.runId} is still active: send stopRun first`);
    const abort = new AbortController();
    const run = this.options.launch({ config: this.config, ...(fromCheckpoint ? { fromCheckpoint } : {}), onRecord, signal: abort.signal });
    const current = { run, abort };
    this.active = current;
    run.done
      .catch((error: unknown) => this.options.log(`run ${run.runId} failed: ${(error as Error).message}`))
      .finally(() => {
        if (this.active === current) this.active = undefined;
      });
    return run;
  }

  /** Stops the active run, if any, and waits for it to end. */
  async stop(): Promise<void> {
    const current = this.active;
    if (!current) return;
    current.abort.abort();
    await current.run.done.catch(() => undefined);
  }

  /** The active run, or a `no-active-run` RequestError saying what needed one. */
  activeRun(forWhat: string): LaunchedRun {
    if (!this.active) throw new RequestError('no-active-run', `no run is active: ${forWhat}`);
    return this.active.run;
  }
}

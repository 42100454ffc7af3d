// The extension's one live connection: a TrainerClient whose telemetry goes into the run store,
// plus the next-run changes the user made while no trainer was connected (sent on connect).
// Plain Node (no vscode), so it is tested against a real server.
import { mergeRunConfig, type AckMessage, type NextRunConfig, type RunConfig } from '../protocol/index.js';
import { TrainerClient, TrainerRefusal, type ClientRequest, type ConnectionState } from '../link/trainer-client.js';
import type { RunStore, RunSummary } from '../store/run-store.js';
import { combineChanges, isEmptyChange } from './next-run-change.js';

export interface LinkSnapshot {
  state: ConnectionState | undefined;
  url: string | undefined;
  /** Newest live run in the store. */
  run: RunSummary | undefined;
  nextRunConfig: RunConfig | undefined;
  /** Why the state last changed (e.g. the refusal reason once `closed`). */
  detail: string | undefined;
}

export class LiveLink {
  private client: TrainerClient | undefined;
  private url: string | undefined;
  private detail: string | undefined;
  private pending: NextRunConfig = {};
  private readonly listeners = new Set<() => void>();
  private readonly refusalListeners = new Set<(reason: string) => void>();
  /** Records the store refused on the current connection (a hostile or buggy trainer can send many). */
  private refused = 0;

  constructor(
    private readonly store: RunStore,
    private readonly log: (line: string) => void,
    /** What the next run looks like before any trainer has told us (e.g. the emulation preset). */
    private localBase: RunConfig | undefined = undefined,
  ) {
    store.onDidChange((change) => {
      if (change.record?.type !== 'layerStats') this.emit();
    });
  }

  /** `url` may carry the token as `?token=` (a pasted listening-line URL); it is never logged or kept in the URL. */
  connect(urlMaybeWithToken: string, token?: string): void {
    this.disconnect();
    this.refused = 0;
    this.detail = undefined;
    const client: TrainerClient = new TrainerClient({
      url: urlMaybeWithToken,
      ...(token ? { token } : {}),
      client: { name: 'mxscope-vscode', version: '0.1.0' },
      onTelemetry: (record) => {
        const refused = this.store.ingest(record, 'live');
        if (refused !== undefined) this.logRefusal(refused);
      },
      onNextRunConfig: () => this.emit(),
      onNewSession: () => this.store.markOrphaned('live'),
      onState: (state, detail) => {
        if (this.client !== client) return;
        this.detail = detail;
        this.log(`${state}${detail ? `: ${detail}` : ''}`);
        if (state === 'connected') this.flushPending().catch((error: Error) => this.refusedOnConnect(error.message));
        if (state === 'closed') this.store.markOrphaned('live');
        this.emit();
      },
      log: (line) => this.log(line),
    });
    // The client has split any ?token= off the URL: only the bare URL is kept and logged.
    this.url = client.url;
    this.log(`connecting to ${client.url}${client.hasToken ? ' (with token)' : ''}`);
    this.client = client;
    this.emit();
  }

  disconnect(): void {
    const client = this.client;
    if (!client) return;
    this.client = undefined;
    client.close();
    this.store.markOrphaned('live');
    this.log(`disconnected from ${this.url}`);
    this.emit();
  }

  /** The URL connected (or connecting, or reconnecting) to; undefined once disconnected. */
  get activeUrl(): string | undefined {
    return this.client ? this.url : undefined;
  }

  get connected(): boolean {
    return this.client?.state === 'connected';
  }

  snapshot(): LinkSnapshot {
    const live = this.store.list().filter((run) => run.source === 'live');
    return { state: this.client?.state, url: this.url, run: live[live.length - 1], nextRunConfig: this.nextRunConfig(), detail: this.detail };
  }

  /** The trainer's next-run config with pending changes applied, or the local base with them. */
  nextRunConfig(): RunConfig | undefined {
    const base = this.client?.nextRunConfig ?? this.localBase;
    return base ? mergeRunConfig(base, this.pending) : undefined;
  }

  setLocalBase(config: RunConfig): void {
    this.localBase = config;
    this.emit();
  }

  /** Applies to the connected trainer now, or is kept and sent when one connects. Returns what happened; throws the trainer's refusal (which names what to change). */
  async changeNextRun(change: NextRunConfig): Promise<string> {
    this.pending = combineChanges(this.pending, change);
    this.emit();
    if (!this.connected) return 'saved; it is sent to the trainer when one connects';
    if (await this.flushPending()) return 'sent to the trainer; it applies at the next run start';
    return 'kept: the trainer did not take it (see the MX Scope output); it is sent again on the next connection';
  }

  request(request: ClientRequest): Promise<AckMessage> {
    if (!this.client) return Promise.reject(new Error('not connected to a trainer: start an emulated run or connect first'));
    return this.client.request(request);
  }

  onDidChange(listener: () => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** A change made while no trainer was connected, refused by the trainer on connect (and dropped): no command is there to say so. */
  onDidRefuseChange(listener: (reason: string) => void): { dispose(): void } {
    this.refusalListeners.add(listener);
    return { dispose: () => this.refusalListeners.delete(listener) };
  }

  private refusedOnConnect(reason: string): void {
    this.log(`the trainer refused the next-run change made while it was not connected, which is dropped: ${reason}`);
    for (const listener of this.refusalListeners) listener(reason);
  }

  /**
   * Sends the pending change. One the trainer refuses (it says why) is dropped and the refusal thrown:
   * kept, it would show as the next run's config and ride along with every later change, which the
   * trainer would refuse too. One that could not be sent (no reply, no connection) is kept for the
   * next connection. Resolves to whether the trainer took it.
   */
  private async flushPending(): Promise<boolean> {
    if (isEmptyChange(this.pending)) return true;
    const change = this.pending;
    let answered = true;
    try {
      await this.request({ type: 'setNextRunConfig', change });
      return true;
    } catch (error) {
      if (error instanceof TrainerRefusal) throw error;
      answered = false;
      this.log(`could not send the next-run config: ${(error as Error).message}`);
      return false;
    } finally {
      // Taken or refused, the change is done with; only one the trainer never answered waits.
      if (answered && this.pending === change) this.pending = {};
      this.emit();
    }
  }

  /** Logs the first refusals of a connection, then every 1000th, so a flood cannot flood the output too. */
  private logRefusal(reason: string): void {
    const count = ++this.refused;
    if (count <= 10) this.log(reason);
    else if (count % 1000 === 0) this.log(`${count} records refused so far on this connection (latest: ${reason})`);
  }

  private emit(): void {
    for (const listener of this.listeners) listener();
  }
}

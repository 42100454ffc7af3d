// The host side of protocol v1: connects to a trainer, checks the hello, subscribes from the last
// seq it has, reconnects with backoff when the trainer goes away, and turns requests into promises
// that resolve on the matching ack or reject with the server's error message.
import {
  isCompatible,
  PROTOCOL_VERSION,
  SERVER_MESSAGE_TYPES,
  serverMessageSchema,
  MAX_FRAME_BYTES,
  type AckMessage,
  type ClientMessage,
  type ErrorCode,
  type RunConfig,
  type ServerHello,
  type ServerMessage,
  type ServerTelemetry,
} from '../protocol/index.js';
import { splitTokenUrl } from './auth.js';
import { frameTooLarge, readFrame } from './frames.js';
import { WsClient } from './ws-client.js';

/** A request the trainer answered with an error: it refused it (as opposed to no reply, or no connection). */
export class TrainerRefusal extends Error {
  constructor(reason: string, readonly code: ErrorCode) {
    super(`${reason} [${code}]`);
  }
}

export type ConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'closed';

/** A request as the caller writes it; the client adds the id. */
export type ClientRequest = ClientMessage extends infer M ? (M extends ClientMessage ? Omit<M, 'id'> : never) : never;

export interface TrainerClientOptions {
  /** May carry the token as `?token=` (the listening line's form): it is sent as a header instead. */
  url: string;
  token?: string;
  client?: { name: string; version: string };
  onTelemetry: (record: ServerTelemetry) => void;
  onNextRunConfig?: (config: RunConfig) => void;
  /** The trainer restarted (a new sessionId after a previous one): runs it had in progress are gone. */
  onNewSession?: (sessionId: string) => void;
  /** `detail` says why (e.g. the refusal reason when the state becomes `closed`). */
  onState?: (state: ConnectionState, detail?: string) => void;
  log?: (line: string) => void;
  backoff?: { initialMs: number; maxMs: number };
  /**
   * Connection attempts before giving up (state `closed`, detail = the last socket error, e.g.
   * ECONNREFUSED): few while no session was ever established (a wrong URL should fail in seconds),
   * more after one was (a trainer restarting). Defaults: 4 and 60.
   */
  maxAttempts?: { first: number; afterSession: number };
  requestTimeoutMs?: number;
}

/**
 * The server may send whole run configs with many layers; allow bigger frames than a client sends,
 * but bounded: parsing a frame blocks the extension host (a 57 MiB one blocked it for 30 s).
 */
export const MAX_SERVER_FRAME_BYTES = 4 * MAX_FRAME_BYTES;

export class TrainerClient {
  private socket: WsClient | undefined;
  private currentState: ConnectionState = 'connecting';
  private session: string | undefined;
  private seq = 0;
  /** Newest telemetry seq on the current connection: along one connection seqs only increase. */
  private connectionSeq = 0;
  private nextId = 1;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The last socket error, e.g. "connect ECONNREFUSED 127.0.0.1:7399": the reason a user needs to see. */
  private lastError: string | undefined;
  private serverHello: ServerHello | undefined;
  private latestConfig: RunConfig | undefined;
  private readonly pending = new Map<string, { resolve: (ack: AckMessage) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  private readonly log: (line: string) => void;

  /** The trainer's URL without any `?token=` (which moves to the Authorization header). */
  readonly url: string;
  private readonly token: string | undefined;

  constructor(private readonly options: TrainerClientOptions) {
    this.log = options.log ?? (() => {});
    const split = splitTokenUrl(options.url);
    this.url = split.url;
    this.token = options.token ?? split.token;
    this.open();
  }

  get hasToken(): boolean {
    return this.token !== undefined;
  }

  get state(): ConnectionState {
    return this.currentState;
  }
  /** Seq of the newest telemetry message received in the current session. */
  get lastSeq(): number {
    return this.seq;
  }
  get hello(): ServerHello | undefined {
    return this.serverHello;
  }
  get nextRunConfig(): RunConfig | undefined {
    return this.latestConfig;
  }

  /** Sends a request; resolves with its ack, rejects with the server's error message. */
  request(request: ClientRequest): Promise<AckMessage> {
    const socket = this.socket;
    if (this.currentState !== 'connected' || !socket) return Promise.reject(new Error(`not connected to ${this.url} (${this.currentState})`));
    const id = `r${this.nextId++}`;
    return new Promise((resolve, reject) => {
      const timeoutMs = this.options.requestTimeoutMs ?? 30_000;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${request.type}: no reply from the trainer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      socket.send(JSON.stringify({ ...request, id }));
    });
  }

  /** Closes for good: no reconnect. */
  close(reason = 'disconnected'): void {
    this.setState('closed', reason);
    clearTimeout(this.retryTimer);
    this.socket?.close(1000, 'client disconnecting');
    this.failPending('disconnected');
  }

  private open(): void {
    // No Origin header: servers refuse upgrades that carry one (that is how they keep browsers out).
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : undefined;
    this.connectionSeq = 0;
    // readFrame checks every text frame's UTF-8 as it decodes it and drops a bad frame with an
    // error saying so; the connection lives (a reconnect would replay the same frame).
    const socket: WsClient = new WsClient(this.url, { headers, maxPayload: MAX_SERVER_FRAME_BYTES }, {
      open: () => {
        const client = this.options.client ?? { name: 'mxscope-client', version: '0.1.0' };
        socket.send(JSON.stringify({ type: 'hello', id: `h${this.nextId++}`, protocol: PROTOCOL_VERSION, client }));
      },
      message: (data, isBinary) => {
        const frame = readFrame(data, isBinary, serverMessageSchema, SERVER_MESSAGE_TYPES, MAX_SERVER_FRAME_BYTES);
        if (frame.kind === 'unknown') return this.log(`ignored a server message of unknown type "${frame.type}" (newer trainer?)`);
        if (frame.kind === 'error') return this.log(`dropped a server frame: ${frame.message}`);
        this.receive(socket, frame.message);
      },
      tooLarge: (bytes) => this.log(`dropped a server frame: ${frameTooLarge(bytes, MAX_SERVER_FRAME_BYTES)}`),
      refused: (status) => {
        const refused = status === 401 || status === 403;
        const why = status === 401 ? 'refused the token (HTTP 401): check the token' : 'refused this client (HTTP 403: a request with an Origin header, as browsers send)';
        const reason = refused ? `the trainer at ${this.url} ${why}` : `unexpected HTTP ${status} from ${this.url}`;
        this.log(reason);
        if (refused) this.close(reason);
      },
      error: (error) => {
        this.lastError = error.message;
        this.log(`connection to ${this.url}: ${error.message}`);
      },
      close: (code, reason) => {
        if (this.socket !== socket) return;
        this.failPending(`connection closed (${code}${reason.length ? ` ${reason}` : ''})`);
        if (this.currentState === 'closed') return;
        this.scheduleReconnect();
      },
    });
    this.socket = socket;
  }

  private receive(socket: WsClient, message: ServerMessage): void {
    switch (message.type) {
      case 'hello':
        return this.onHello(socket, message);
      case 'nextRunConfig':
        this.latestConfig = message.config;
        this.options.onNextRunConfig?.(message.config);
        return;
      case 'ack':
        if (message.id.startsWith('s') && message.detail) this.log(`subscribed: ${message.detail}`);
        return this.settle(message.id, (entry) => entry.resolve(message));
      case 'error':
        if (message.id === undefined || !this.pending.has(message.id)) return this.log(`trainer error (${message.code}): ${message.message}`);
        return this.settle(message.id, (entry) => entry.reject(new TrainerRefusal(message.message, message.code)));
      default:
        if (message.seq <= this.connectionSeq) {
          // A server's seqs never go back along one connection. When they do (a bogus seq such as
          // 2^53−1 went before), follow the new numbering rather than drop the rest of the session.
          this.log(`telemetry seq went back from ${this.connectionSeq} to ${message.seq} on one connection: the trainer's numbering is broken; following it from here`);
          this.seq = message.seq - 1;
        }
        this.connectionSeq = message.seq;
        if (message.seq <= this.seq) return; // already have it (replay overlap)
        if (message.seq !== this.seq + 1) this.log(`telemetry gap: expected seq ${this.seq + 1}, got ${message.seq}`);
        this.seq = message.seq;
        this.options.onTelemetry(message);
    }
  }

  private onHello(socket: WsClient, hello: ServerHello): void {
    if (!isCompatible(hello.protocol)) {
      const reason = `the trainer speaks protocol ${hello.protocol.major}.${hello.protocol.minor}; this client speaks ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}: update the one that is older`;
      this.log(reason);
      this.close(reason);
      return;
    }
    if (hello.sessionId !== this.session) {
      const restarted = this.session !== undefined;
      this.session = hello.sessionId;
      if (restarted) {
        this.log(`trainer restarted (new session ${hello.sessionId}): subscribing from its start`);
        this.options.onNewSession?.(hello.sessionId);
      }
      this.seq = 0;
    }
    this.serverHello = hello;
    this.attempt = 0;
    this.lastError = undefined;
    this.setState('connected', `${hello.trainer.name} ${hello.trainer.version}`);
    const id = `s${this.nextId++}`;
    socket.send(JSON.stringify({ type: 'subscribe', id, from: this.seq + 1 }));
  }

  private settle(id: string, action: (entry: { resolve: (ack: AckMessage) => void; reject: (error: Error) => void }) => void): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.pending.delete(id);
    action(entry);
  }

  private failPending(reason: string): void {
    for (const [id, entry] of this.pending) this.settle(id, () => entry.reject(new Error(reason)));
  }

  private scheduleReconnect(): void {
    const { initialMs, maxMs } = this.options.backoff ?? { initialMs: 250, maxMs: 10_000 };
    const limits = this.options.maxAttempts ?? { first: 4, afterSession: 60 };
    const why = this.lastError ?? 'the connection closed';
    if (this.attempt + 1 >= (this.session ? limits.afterSession : limits.first)) {
      this.close(`could not connect to ${this.url} after ${this.attempt + 1} attempts: ${why}`);
      return;
    }
    const delay = Math.min(maxMs, initialMs * 2 ** this.attempt++);
    this.setState('reconnecting', `${why}; retrying in ${delay} ms`);
    this.retryTimer = setTimeout(() => {
      if (this.currentState === 'closed') return;
      this.setState(this.session ? 'reconnecting' : 'connecting');
      this.open();
    }, delay);
  }

  private setState(state: ConnectionState, detail?: string): void {
    if (this.currentState === state && state !== 'reconnecting') return;
    this.currentState = state;
    this.options.onState?.(state, detail);
  }
}

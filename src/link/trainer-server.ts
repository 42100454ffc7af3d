// The trainer side of protocol v1: the websocket layer (auth, frames, per-client backpressure)
// over two parts — numbering and replay (telemetry-sequence.ts) and run control (run-control.ts),
// which runs the start/stop/checkpoint/next-run-config requests against whatever launches runs
// (the emulation trainer, or a test's fake).
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import {
  CAPABILITIES,
  CLIENT_MESSAGE_TYPES,
  clientMessageSchema,
  isCompatible,
  MAX_FRAME_BYTES,
  PROTOCOL_VERSION,
  type ClientMessage,
  type ErrorCode,
  type NextRunConfig,
  type RunConfig,
  type ServerMessage,
  type TelemetryRecord,
} from '../protocol/index.js';
import { isLoopbackHost, presentedToken, refusedOrigin, tokenMatches } from './auth.js';
import { checkCheckpointPath } from './checkpoint-path.js';
import { readFrame } from './frames.js';
import { RequestError, RunControl, type RunLauncher } from './run-control.js';
import { TelemetrySequence } from './telemetry-sequence.js';

export type { LaunchedRun, LaunchOptions, RunLauncher } from './run-control.js';

export interface TrainerServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Required when `host` is not loopback. */
  token?: string;
  /** `Origin` values allowed to connect (browser pages); upgrades with any other Origin get 403. */
  allowOrigins?: readonly string[];
  /**
   * Directories `startRun.fromCheckpoint` may read `.safetensors` files from (the run directories
   * the launcher writes, plus any allow-listed by the operator). Without any, resuming is refused.
   */
  checkpointDirs?: readonly string[];
  baseConfig: RunConfig;
  launch: RunLauncher;
  /**
   * How a requested change becomes the next run's config. Default: `mergeRunConfig`. A publisher
   * whose presets imply model shapes passes its own, so a preset change brings the preset's model.
   * Throwing rejects the request with the error's message.
   */
  applyChange?: (base: RunConfig, change: NextRunConfig) => RunConfig;
  trainer?: { name: string; version: string };
  /** Telemetry bytes kept in memory for replay (default 256 MiB). */
  replayBytes?: number;
  /** A client whose unsent backlog exceeds this is closed (it reconnects and replays). Default 64 MiB. */
  maxClientBacklogBytes?: number;
  log?: (line: string) => void;
}

export interface TrainerServer {
  readonly url: string;
  readonly sessionId: string;
  readonly nextRunConfig: RunConfig;
  /** Seq of the newest telemetry message (0 before the first). */
  readonly lastSeq: number;
  /** Bytes of frames the replay memory holds now (at most `replayBytes` plus one frame). */
  readonly replayHeldBytes: number;
  /** Stops the active run (if any) and waits for it to end. */
  stopRun(): Promise<void>;
  /** Stops the run, closes every connection and the listening socket. */
  close(): Promise<void>;
}

/** Hard ceiling above which `ws` itself closes the connection (1009); below it, oversized frames get an error reply. */
const HARD_FRAME_BYTES = 4 * MAX_FRAME_BYTES;
const DEFAULT_REPLAY_BYTES = 256 * 1024 * 1024;
const DEFAULT_BACKLOG_BYTES = 64 * 1024 * 1024;

interface Peer {
  socket: WebSocket;
  /** The TCP connection under `socket` (the upgrade request's socket). */
  tcp: Socket;
  subscribed: boolean;
}

/**
 * Holds back what is written to `tcp` until the current tick ends, so the frames sent in one tick
 * leave in one write. A trainer publishes a stats step's hundreds of records in one go: one TCP
 * segment each made the client pay its stream and event overhead once per record (bench/ingest:
 * host CPU at a paced 20,000 records/s went from 56–64% of a core to 45–51%).
 */
function coalesceUntilNextTick(tcp: Socket): void {
  if (tcp.writableCorked > 0) return;
  tcp.cork();
  process.nextTick(() => tcp.uncork());
}

/** Frames are kept as UTF-8 Buffers (replay-buffer.ts) and go out as text frames. */
const TEXT = { binary: false } as const;

/** Returned by a handler that already sent its own reply. */
const REPLIED = Symbol('replied');

export async function startTrainerServer(options: TrainerServerOptions): Promise<TrainerServer> {
  const host = options.host ?? '127.0.0.1';
  const token = options.token;
  if (!isLoopbackHost(host) && !token) throw new Error(`binding to ${host} (not loopback) needs a token: pass one, or let the serve command generate it`);
  const log = options.log ?? (() => {});
  const trainer = options.trainer ?? { name: 'mxscope', version: '0.1.0' };
  const sessionId = randomUUID();
  const sequence = new TelemetrySequence(options.replayBytes ?? DEFAULT_REPLAY_BYTES, log);
  const control = new RunControl({ baseConfig: options.baseConfig, launch: options.launch, ...(options.applyChange ? { applyChange: options.applyChange } : {}), log });
  const maxBacklog = options.maxClientBacklogBytes ?? DEFAULT_BACKLOG_BYTES;
  const peers = new Set<Peer>();

  const wss = new WebSocketServer({
    host,
    port: options.port ?? 0,
    maxPayload: HARD_FRAME_BYTES,
    verifyClient: (info: { req: IncomingMessage }, done: (ok: boolean, code?: number, message?: string) => void) => {
      const originRefusal = refusedOrigin(info.req, options.allowOrigins ?? []);
      if (originRefusal) {
        log(`refused a connection from ${info.req.socket.remoteAddress}: ${originRefusal}`);
        return done(false, 403, originRefusal);
      }
      if (!token || tokenMatches(token, presentedToken(info.req))) return done(true);
      log(`refused a connection from ${info.req.socket.remoteAddress}: missing or wrong token`);
      done(false, 401, 'a valid token is required (query parameter "token" or header "Authorization: Bearer <token>")');
    },
  });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  const address = wss.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `ws://${urlHost}:${address.port}`;

  function send(peer: Peer, message: ServerMessage | string): void {
    peer.socket.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  function sendError(peer: Peer, code: ErrorCode, message: string, id?: string): void {
    send(peer, { type: 'error', seq: sequence.lastSeq, code, message, ...(id !== undefined ? { id } : {}) });
  }

  function publish(record: TelemetryRecord, json?: string): void {
    const frame = sequence.append(record, json);
    for (const peer of peers) {
      if (!peer.subscribed) continue;
      if (peer.socket.bufferedAmount > maxBacklog) {
        log(`closing a client that fell ${peer.socket.bufferedAmount} bytes behind; it can reconnect and subscribe from its last seq`);
        peer.socket.close(1013, 'too far behind: reconnect and subscribe from your last seq');
        peers.delete(peer);
        continue;
      }
      coalesceUntilNextTick(peer.tcp);
      peer.socket.send(frame, TEXT);
    }
  }

  function broadcastNextRunConfig(): void {
    for (const peer of peers) if (peer.subscribed) send(peer, { type: 'nextRunConfig', seq: sequence.lastSeq, config: control.nextRunConfig });
  }

  async function subscribe(peer: Peer, id: string, from: number | undefined): Promise<void> {
    const isOpen = () => peer.socket.readyState === peer.socket.OPEN;
    const cursor = await sequence.replayFromLogs(from ?? sequence.lastSeq + 1, (frame) => peer.socket.send(frame, TEXT), isOpen);
    if (!isOpen()) return;
    // Replay the rest and go live in one synchronous pass, so no record can fall between the two.
    coalesceUntilNextTick(peer.tcp);
    for (const frame of sequence.framesFrom(cursor)) peer.socket.send(frame, TEXT);
    peer.subscribed = true;
    const { lastSeq, oldestInMemory } = sequence;
    const start = from ?? lastSeq + 1;
    const gap = cursor < oldestInMemory;
    const detail = gap ? `replayed from seq ${oldestInMemory}: seqs ${cursor}..${oldestInMemory - 1} are no longer held` : `replayed from seq ${Math.min(start, lastSeq + 1)}`;
    send(peer, { type: 'ack', seq: lastSeq, id, detail });
    send(peer, { type: 'nextRunConfig', seq: lastSeq, config: control.nextRunConfig });
  }

  function startRun(fromCheckpoint: string | undefined): string {
    const firstSeq = sequence.lastSeq + 1;
    const run = control.start(fromCheckpoint, publish);
    sequence.addRun(firstSeq, run.dir);
    return run.runId;
  }

  /** Runs one request; resolves to the ack's detail, throws a RequestError for an error reply. */
  async function handle(peer: Peer, message: ClientMessage): Promise<string | undefined | typeof REPLIED> {
    switch (message.type) {
      case 'hello':
        if (!isCompatible(message.protocol)) {
          const theirs = `${message.protocol.major}.${message.protocol.minor}`;
          throw new RequestError('incompatible-version', `protocol ${theirs} is not compatible with this server's ${PROTOCOL_VERSION.major}.${PROTOCOL_VERSION.minor}: use a client for protocol major version ${PROTOCOL_VERSION.major}`);
        }
        return `${trainer.name} ${trainer.version}`;
      case 'subscribe':
        await subscribe(peer, message.id, message.from);
        return REPLIED;
      case 'setNextRunConfig':
        control.change(message.change);
        broadcastNextRunConfig();
        return 'applies at the next run start';
      case 'startRun':
        if (message.fromCheckpoint !== undefined) {
          const refusal = await checkCheckpointPath(message.fromCheckpoint, options.checkpointDirs ?? []);
          if (refusal) throw new RequestError('invalid-message', refusal);
        }
        return startRun(message.fromCheckpoint);
      case 'stopRun':
        control.activeRun('nothing to stop');
        await control.stop();
        return 'stopped';
      case 'saveCheckpoint':
        return await control.activeRun('start one before saving a checkpoint').saveCheckpoint();
    }
  }

  wss.on('connection', (socket, request) => {
    const peer: Peer = { socket, tcp: request.socket, subscribed: false };
    peers.add(peer);
    send(peer, { type: 'hello', seq: sequence.lastSeq, protocol: PROTOCOL_VERSION, trainer, sessionId, capabilities: [...CAPABILITIES], lastSeq: sequence.lastSeq });
    socket.on('message', (data, isBinary) => {
      // Nothing a client sends may take the server (and its run) down: a throw escaping this
      // handler would end the process. Any failure becomes an `internal` error reply.
      try {
        onMessage(peer, data, isBinary);
      } catch (error) {
        log(`a client frame failed unexpectedly: ${(error as Error).stack ?? String(error)}`);
        if (socket.readyState === socket.OPEN) sendError(peer, 'internal', `the frame could not be handled (${(error as Error).message}); nothing changed`);
      }
    });
    socket.on('close', () => peers.delete(peer));
    socket.on('error', (error) => log(`client connection error: ${error.message}`));
  });

  function onMessage(peer: Peer, data: RawData, isBinary: boolean): void {
    const socket = peer.socket;
    const frame = readFrame(data, isBinary, clientMessageSchema, CLIENT_MESSAGE_TYPES, MAX_FRAME_BYTES);
    if (frame.kind === 'unknown') return log(`ignored a client message of unknown type "${frame.type}" (newer client?)`);
    if (frame.kind === 'error') {
      log(`dropped a client frame: ${frame.message}`);
      return sendError(peer, frame.code, frame.message, frame.id);
    }
    const message = frame.message;
    handle(peer, message).then(
      (detail) => {
        if (detail === REPLIED || socket.readyState !== socket.OPEN) return;
        send(peer, { type: 'ack', seq: sequence.lastSeq, id: message.id, ...(detail !== undefined ? { detail } : {}) });
      },
      (error: unknown) => {
        const code = error instanceof RequestError ? error.code : 'internal';
        if (code === 'internal') log(`${message.type} failed: ${(error as Error).stack ?? String(error)}`);
        if (socket.readyState !== socket.OPEN) return;
        sendError(peer, code, `${message.type}: ${(error as Error).message}`, message.id);
        if (code === 'incompatible-version') socket.close(1002, 'incompatible protocol version');
      },
    ).catch((error: unknown) => log(`replying to ${message.type} failed: ${(error as Error).message}`));
  }

  return {
    url,
    sessionId,
    get nextRunConfig() {
      return control.nextRunConfig;
    },
    get lastSeq() {
      return sequence.lastSeq;
    },
    get replayHeldBytes() {
      return sequence.heldBytes;
    },
    stopRun: () => control.stop(),
    async close() {
      await control.stop();
      for (const peer of peers) peer.socket.close(1001, 'trainer shutting down');
      const stragglers = setTimeout(() => peers.forEach((peer) => peer.socket.terminate()), 1000);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      clearTimeout(stragglers);
    },
  };
}

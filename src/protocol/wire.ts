// Protocol v1 on the websocket: JSON text frames, one message per frame. One discriminated union
// per direction. See docs/protocol.md for the prose and an example of every message.
import { nextRunConfigSchema, runConfigSchema, type NextRunConfig, type RunConfig } from './config.js';
import { telemetryRecordSchema, TELEMETRY_TYPES, type TelemetryRecord } from './telemetry.js';
import { arrayOf, intIn, literal, nonNegInt, object, optional, str, union, type Schema } from './validate.js';

export const PROTOCOL_VERSION = { major: 1, minor: 8 } as const;
/** Frames above this size are answered with an `error` (code `frame-too-large`) and dropped. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

export interface ProtocolVersion {
  major: number;
  minor: number;
}

export const CAPABILITIES = ['layerStats', 'wgradError', 'replay', 'nextRunConfig', 'startRun', 'stopRun', 'saveCheckpoint'] as const;
export type Capability = (typeof CAPABILITIES)[number];

// ---------------------------------------------------------------- server → client

/**
 * Sent first on every connection. `sessionId` names this server process: `seq` numbers are only
 * comparable within one session, so a client that sees a new sessionId subscribes from 0.
 */
export interface ServerHello {
  type: 'hello';
  seq: number;
  protocol: ProtocolVersion;
  trainer: { name: string; version: string };
  sessionId: string;
  /** Names from CAPABILITIES; unknown names are ignored by clients. */
  capabilities: string[];
  /** The seq of the newest telemetry message so far (0 if none). */
  lastSeq: number;
}

/**
 * A telemetry record on the wire. Telemetry messages are numbered 1, 2, 3… with no gaps within a
 * session; `subscribe {from}` replays every one with seq ≥ from that the server still has.
 */
export type ServerTelemetry = TelemetryRecord & { seq: number };

/** The configuration the next `startRun` will use (sent on subscribe and whenever it changes). */
export interface NextRunConfigMessage {
  type: 'nextRunConfig';
  seq: number;
  config: RunConfig;
}

/** Success reply to a client request with the same `id`. */
export interface AckMessage {
  type: 'ack';
  seq: number;
  id: string;
  /** e.g. the runId a startRun started, or the checkpoint path a saveCheckpoint wrote. */
  detail?: string;
}

export const ERROR_CODES = [
  'bad-json',
  'invalid-message',
  'frame-too-large',
  'incompatible-version',
  'unauthorized',
  'not-subscribed',
  'no-active-run',
  'run-active',
  'not-supported',
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** A request that failed (with its `id`), or a frame that could not be read (no `id`). */
export interface ErrorMessage {
  type: 'error';
  seq: number;
  id?: string;
  code: ErrorCode;
  message: string;
}

/**
 * Control messages (hello, nextRunConfig, ack, error) carry the seq of the newest telemetry message
 * sent before them, so `seq` never decreases along a connection.
 */
export type ServerMessage = ServerHello | ServerTelemetry | NextRunConfigMessage | AckMessage | ErrorMessage;

// ---------------------------------------------------------------- client → server

/** Optional first message of a client; a server refuses an incompatible major version. */
export interface ClientHello {
  type: 'hello';
  id: string;
  protocol: ProtocolVersion;
  client: { name: string; version: string };
}

/** Start receiving telemetry; with `from`, first replay everything from that seq on. */
export interface SubscribeRequest {
  type: 'subscribe';
  id: string;
  from?: number;
}

/** Change the configuration of the next run (applied at the next run start, not to a live run). */
export interface SetNextRunConfigRequest {
  type: 'setNextRunConfig';
  id: string;
  change: NextRunConfig;
}

/** Start a run with the next-run config, from step 0 or from a checkpoint the server can read. */
export interface StartRunRequest {
  type: 'startRun';
  id: string;
  fromCheckpoint?: string;
}

export interface StopRunRequest {
  type: 'stopRun';
  id: string;
}

export interface SaveCheckpointRequest {
  type: 'saveCheckpoint';
  id: string;
}

export type ClientMessage = ClientHello | SubscribeRequest | SetNextRunConfigRequest | StartRunRequest | StopRunRequest | SaveCheckpointRequest;
export const CLIENT_MESSAGE_TYPES: readonly ClientMessage['type'][] = ['hello', 'subscribe', 'setNextRunConfig', 'startRun', 'stopRun', 'saveCheckpoint'];
export const SERVER_MESSAGE_TYPES: readonly ServerMessage['type'][] = ['hello', 'nextRunConfig', 'ack', 'error', ...TELEMETRY_TYPES];

// ---------------------------------------------------------------- validation

const id = str(128);
const seq = nonNegInt;
/** Telemetry is numbered from 1 (control messages carry the newest telemetry seq, 0 before any). */
const telemetrySeq = intIn(1, Number.MAX_SAFE_INTEGER);
const versionSchema = object<ProtocolVersion>({ major: intIn(0, 1000), minor: intIn(0, 1000) });
const nameVersion = object<{ name: string; version: string }>({ name: str(128), version: str(64) });

export const clientMessageSchema: Schema<ClientMessage> = union<ClientMessage>({
  hello: object<ClientHello>({ type: literal('hello'), id, protocol: versionSchema, client: nameVersion }),
  subscribe: object<SubscribeRequest>({ type: literal('subscribe'), id, from: optional(nonNegInt) }),
  setNextRunConfig: object<SetNextRunConfigRequest>({ type: literal('setNextRunConfig'), id, change: nextRunConfigSchema }),
  startRun: object<StartRunRequest>({ type: literal('startRun'), id, fromCheckpoint: optional(str(4096)) }),
  stopRun: object<StopRunRequest>({ type: literal('stopRun'), id }),
  saveCheckpoint: object<SaveCheckpointRequest>({ type: literal('saveCheckpoint'), id }),
});

const controlSchema = union<ServerHello | NextRunConfigMessage | AckMessage | ErrorMessage>({
  hello: object<ServerHello>({
    type: literal('hello'),
    seq,
    protocol: versionSchema,
    trainer: nameVersion,
    sessionId: str(128),
    capabilities: arrayOf(str(64), 64),
    lastSeq: seq,
  }),
  nextRunConfig: object<NextRunConfigMessage>({ type: literal('nextRunConfig'), seq, config: runConfigSchema }),
  ack: object<AckMessage>({ type: literal('ack'), seq, id, detail: optional(str(4096)) }),
  error: object<ErrorMessage>({ type: literal('error'), seq, id: optional(id), code: literal(...ERROR_CODES), message: str(4096) }),
});

export const serverMessageSchema: Schema<ServerMessage> = (v, p) => {
  const tag = typeof v === 'object' && v !== null ? (v as { type?: unknown }).type : undefined;
  const isTelemetry = typeof tag === 'string' && (TELEMETRY_TYPES as readonly string[]).includes(tag);
  if (!isTelemetry) return controlSchema(v, p);
  telemetrySeq((v as { seq?: unknown }).seq, `${p}.seq`);
  return telemetryRecordSchema(v, p) as ServerTelemetry;
};

/** Whether a peer speaking `theirs` can talk to us: same major version. */
export function isCompatible(theirs: ProtocolVersion): boolean {
  return theirs.major === PROTOCOL_VERSION.major;
}

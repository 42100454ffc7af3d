// The host's websocket client: RFC 6455, client side, no extensions, for TrainerClient. It reads
// the socket into one buffer that lives as long as the connection (`onread`). The `ws` package's
// client reads through Node's streams, which allocate a fresh buffer for every socket read: at
// 20,000 telemetry records/s that allocation and its first-touched pages were most of what the
// transport cost (bench/ingest.bench.ts; docs/architecture.md, "Ingest cost"). A message that lies
// whole in one read is handed out as a view of the read buffer, with no copy.
import { isUtf8 } from 'node:buffer';
import { createHash, randomFillSync } from 'node:crypto';
import { connect as connectTcp, isIP, type OnReadOpts, type Socket } from 'node:net';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** Bytes one socket read may fill: a paced stats step arrives in a few reads. */
const READ_BUFFER_BYTES = 256 * 1024;
/** The upgrade response's status line and headers; a server sending more is not one to talk to. */
const MAX_RESPONSE_HEAD_BYTES = 16 * 1024;
/** An assembly buffer grown past this is let go after its message, so a rare big frame does not pin memory. */
const KEPT_ASSEMBLY_BYTES = 1024 * 1024;
const MAX_CONTROL_PAYLOAD = 125;
/** How long a close we started waits for the server's close before the socket is dropped. */
const CLOSE_TIMEOUT_MS = 5000;
/** How long the connection and upgrade may take: a port that accepts and never answers is not left connecting. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

export interface WsClientHandlers {
  /** The server accepted the upgrade: `send` works from here. */
  open(): void;
  /** A whole message. `data` views the client's buffers: it is valid only during the call. */
  message(data: Buffer, isBinary: boolean): void;
  /** A message over `maxPayload` was skipped as it arrived, never kept. */
  tooLarge(bytes: number): void;
  /** The server answered the upgrade with another status than 101 (e.g. 401 for a wrong token). */
  refused(status: number): void;
  /** A socket error (e.g. "connect ECONNREFUSED 127.0.0.1:7399"), a bad upgrade or a frame RFC 6455 forbids. */
  error(error: Error): void;
  /** Once, last: the close frame's code and reason, or 1006 when the connection ended without one. */
  close(code: number, reason: string): void;
}

export interface WsClientOptions {
  /** Extra request headers (Authorization). */
  headers?: Readonly<Record<string, string>>;
  /** Largest message kept, in bytes; a longer one is skipped and reported to `tooLarge`. */
  maxPayload: number;
  /** Connecting and the upgrade together, in ms (default 10 s); past it the connection is dropped with an error. */
  handshakeTimeoutMs?: number;
}

/** A frame the server must not send: the connection fails with `code` (1002, 1007, 1009). */
class ProtocolViolation extends Error {
  constructor(
    readonly code: number,
    reason: string,
  ) {
    super(reason);
  }
}

export function isValidCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

export function acceptFor(key: string): string {
  return createHash('sha1').update(key + ACCEPT_GUID).digest('base64');
}

/** A client frame: FIN, `opcode`, masked with a fresh key as RFC 6455 requires of clients. */
export function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const lengthBytes = n < 126 ? 0 : n < 65536 ? 2 : 8;
  const head = 2 + lengthBytes;
  const frame = Buffer.allocUnsafe(head + 4 + n);
  frame[0] = 0x80 | opcode;
  frame[1] = 0x80 | (lengthBytes === 0 ? n : lengthBytes === 2 ? 126 : 127);
  if (lengthBytes === 2) frame.writeUInt16BE(n, 2);
  else if (lengthBytes === 8) frame.writeBigUInt64BE(BigInt(n), 2);
  randomFillSync(frame, head, 4);
  for (let i = 0; i < n; i++) frame[head + 4 + i] = payload[i]! ^ frame[head + (i & 3)]!;
  return frame;
}

function closePayload(code: number, reason: string): Buffer {
  const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
  payload.writeUInt16BE(code, 0);
  payload.write(reason, 2);
  // A control frame holds at most 125 bytes; cut the reason at a character boundary.
  let end = Math.min(payload.length, MAX_CONTROL_PAYLOAD);
  while (end > 2 && end < payload.length && (payload[end]! & 0xc0) === 0x80) end--;
  return payload.subarray(0, end);
}

type Phase = 'connecting' | 'open' | 'closing' | 'closed';

export class WsClient {
  private readonly socket: Socket;
  private readonly key = randomFillSync(Buffer.alloc(16)).toString('base64');
  private phase: Phase = 'connecting';
  private responseHead: Buffer | undefined = Buffer.alloc(0);
  /** Set once a close frame came, or once this side failed the connection. */
  private closeCode = 1006;
  private closeReason = '';
  private closeSent = false;
  /** False once the connection failed: where the next frame starts is no longer known. */
  private framesTrusted = true;
  private closeTimer: NodeJS.Timeout | undefined;
  private readonly handshakeTimer: NodeJS.Timeout;

  // The frame being read. `headLength` > 0: its header is still arriving, in `head`.
  private readonly head = Buffer.alloc(14);
  private headLength = 0;
  /** From a frame's header until its payload has all been read (when it is not handed out whole). */
  private frameOpen = false;
  private fin = true;
  private opcode = 0;
  private payloadLeft = 0;
  /** Opcode of the message whose fragments are arriving; -1 between messages. */
  private messageOpcode = -1;
  private messageBytes = 0;
  /** The message (or control frame) being assembled where it did not arrive in one read. */
  private assembly = Buffer.alloc(0);
  private assembled = 0;
  private readonly control = Buffer.alloc(MAX_CONTROL_PAYLOAD);
  private controlLength = 0;

  constructor(
    url: string,
    private readonly options: WsClientOptions,
    private readonly handlers: WsClientHandlers,
  ) {
    const target = new URL(url);
    if (target.protocol !== 'ws:' && target.protocol !== 'wss:') throw new Error(`${url}: a trainer URL starts with ws:// or wss://`);
    const secure = target.protocol === 'wss:';
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const port = Number(target.port || (secure ? 443 : 80));
    const onread: OnReadOpts = { buffer: Buffer.allocUnsafeSlow(READ_BUFFER_BYTES), callback: (n, buffer) => this.onRead(buffer as Buffer, n) };
    const connected = () => this.requestUpgrade(target);
    // A server name must not be an IP address (RFC 6066).
    const servername = isIP(host) === 0 ? host : undefined;
    // tls.connect takes `onread` since Node 15 (nodejs/node#35753); @types/node does not list it there.
    this.socket = secure ? connectTls({ host, port, servername, onread } as ConnectionOptions, connected) : connectTcp({ host, port, onread }, connected);
    this.socket.setNoDelay(true);
    const handshakeMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
    this.handshakeTimer = setTimeout(() => {
      this.handlers.error(new Error(`no websocket upgrade from ${target.host} within ${handshakeMs} ms`));
      this.terminate();
    }, handshakeMs);
    this.socket.on('error', (error) => this.handlers.error(error));
    this.socket.on('close', () => this.onSocketClosed());
  }

  get isOpen(): boolean {
    return this.phase === 'open';
  }

  send(text: string): void {
    if (this.phase !== 'open') throw new Error(`websocket is not open (${this.phase}): nothing was sent`);
    this.socket.write(maskedFrame(OP_TEXT, Buffer.from(text, 'utf8')));
  }

  /** Starts the closing handshake (before the upgrade: drops the connection). */
  close(code = 1000, reason = ''): void {
    if (this.phase === 'connecting') return this.terminate();
    if (this.phase !== 'open') return;
    this.closeCode = code;
    this.closeReason = reason;
    this.sendClose(code, reason);
  }

  /** Drops the connection at once. */
  terminate(): void {
    this.socket.destroy();
  }

  private requestUpgrade(target: URL): void {
    const lines = [
      `GET ${target.pathname || '/'}${target.search} HTTP/1.1`,
      `Host: ${target.host}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${this.key}`,
      'Sec-WebSocket-Version: 13',
      ...Object.entries(this.options.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    ];
    this.socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  }

  /** The socket's read callback: true keeps it reading. */
  private onRead(buffer: Buffer, n: number): boolean {
    if (this.phase === 'closed' || !this.framesTrusted) return true;
    try {
      let at = 0;
      if (this.responseHead) {
        at = this.readResponseHead(buffer, n);
        if (at < 0) return true;
      }
      this.readFrames(buffer, at, n);
    } catch (error) {
      if (error instanceof ProtocolViolation) this.fail(error.code, error.message, `the server broke the websocket protocol: ${error.message}`);
      // A handler that throws leaves the rest of this read unread: the frames after it cannot be
      // found again, so the connection closes (a reconnect resubscribes from the last seq it has).
      else this.fail(1011, 'client error', `a message handler threw (${(error as Error).message ?? String(error)}); the connection closes, the rest of this read is lost`);
    }
    return true;
  }

  /** Reads the upgrade response; returns where frames start, or -1 (incomplete, or the connection failed). */
  private readResponseHead(buffer: Buffer, n: number): number {
    const previous = this.responseHead!;
    const joined = Buffer.concat([previous, buffer.subarray(0, n)]);
    const end = joined.indexOf('\r\n\r\n', Math.max(0, previous.length - 3), 'latin1');
    if (end < 0) {
      if (joined.length > MAX_RESPONSE_HEAD_BYTES) this.refuseUpgrade(`its upgrade response's head is over ${MAX_RESPONSE_HEAD_BYTES} bytes`);
      else this.responseHead = joined;
      return -1;
    }
    this.responseHead = undefined;
    clearTimeout(this.handshakeTimer);
    const [statusLine = '', ...headerLines] = joined.toString('latin1', 0, end).split('\r\n');
    const status = /^HTTP\/1\.1 (\d{3})(?: |$)/.exec(statusLine);
    if (!status) return this.refuseUpgrade(`it answered ${JSON.stringify(statusLine.slice(0, 80))}, not HTTP/1.1`);
    if (status[1] !== '101') {
      this.handlers.refused(Number(status[1]));
      this.terminate();
      return -1;
    }
    const headers = new Map<string, string>();
    for (const line of headerLines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    if (headers.get('upgrade')?.toLowerCase() !== 'websocket') return this.refuseUpgrade('its 101 response has no "Upgrade: websocket"');
    if (!/(^|,)\s*upgrade\s*(,|$)/i.test(headers.get('connection') ?? '')) return this.refuseUpgrade('its 101 response has no "Connection: Upgrade"');
    if (headers.get('sec-websocket-accept') !== acceptFor(this.key)) return this.refuseUpgrade('its Sec-WebSocket-Accept does not answer this client\'s key');
    if (headers.has('sec-websocket-extensions')) return this.refuseUpgrade('it named an extension this client did not offer');
    if (headers.has('sec-websocket-protocol')) return this.refuseUpgrade('it named a subprotocol this client did not offer');
    this.phase = 'open';
    this.handlers.open();
    // Frames that came in the same read as the response follow it.
    const frames = end + 4 - previous.length;
    return this.phase === 'open' ? frames : -1;
  }

  private refuseUpgrade(why: string): -1 {
    this.handlers.error(new Error(`not a websocket server: ${why}`));
    this.terminate();
    return -1;
  }

  private readFrames(buffer: Buffer, at: number, end: number): void {
    while (at < end && this.phase !== 'closed') {
      if (!this.frameOpen) {
        at = this.readHead(buffer, at, end);
        if (at < 0) return;
        // A whole unfragmented message in this read: hand out a view of it, no copy.
        if (this.fin && this.opcode !== OP_CONTINUATION && this.opcode < OP_CLOSE && this.payloadLeft <= end - at && this.payloadLeft <= this.options.maxPayload) {
          const stop = at + this.payloadLeft;
          this.payloadLeft = 0;
          this.handlers.message(buffer.subarray(at, stop), this.opcode === OP_BINARY);
          at = stop;
          continue;
        }
        this.startPayload();
        if (this.payloadLeft === 0) {
          this.finishFrame();
          continue;
        }
      }
      const take = Math.min(this.payloadLeft, end - at);
      this.keep(buffer, at, take);
      at += take;
      this.payloadLeft -= take;
      if (this.payloadLeft === 0) this.finishFrame();
    }
  }

  /** Reads a frame header (from `head` if it began in an earlier read); returns where the payload starts, or -1. */
  private readHead(buffer: Buffer, at: number, end: number): number {
    if (this.headLength === 0) {
      const length = this.parseHead(buffer, at, end);
      if (length > 0) return at + length;
    }
    const had = this.headLength;
    const copied = Math.min(this.head.length - had, end - at);
    buffer.copy(this.head, had, at, at + copied);
    this.headLength = had + copied;
    const length = this.parseHead(this.head, 0, this.headLength);
    if (length === 0) return -1;
    this.headLength = 0;
    return at + (length - had);
  }

  /** Parses a header at `at`: its length, or 0 while it is incomplete. Throws on what RFC 6455 forbids of a server. */
  private parseHead(bytes: Buffer, at: number, end: number): number {
    if (end - at < 2) return 0;
    const b0 = bytes[at]!;
    const b1 = bytes[at + 1]!;
    const opcode = b0 & 0x0f;
    if (b0 & 0x70) throw new ProtocolViolation(1002, 'RSV bits set, but no extension was negotiated');
    if (opcode > OP_BINARY && (opcode < OP_CLOSE || opcode > OP_PONG)) throw new ProtocolViolation(1002, `reserved opcode 0x${opcode.toString(16)}`);
    if (b1 & 0x80) throw new ProtocolViolation(1002, 'server frames must not be masked');
    let length = b1 & 0x7f;
    let size = 2;
    if (length === 126) {
      if (end - at < 4) return 0;
      length = bytes.readUInt16BE(at + 2);
      if (length < 126) throw new ProtocolViolation(1002, 'frame length not in its minimal encoding');
      size = 4;
    } else if (length === 127) {
      if (end - at < 10) return 0;
      const long = bytes.readBigUInt64BE(at + 2);
      if (long > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtocolViolation(1009, `frame of ${long} bytes`);
      length = Number(long);
      if (length < 65536) throw new ProtocolViolation(1002, 'frame length not in its minimal encoding');
      size = 10;
    }
    const fin = (b0 & 0x80) !== 0;
    if (opcode >= OP_CLOSE) {
      if (!fin) throw new ProtocolViolation(1002, 'fragmented control frame');
      if (length > MAX_CONTROL_PAYLOAD) throw new ProtocolViolation(1002, `control frame of ${length} bytes (at most ${MAX_CONTROL_PAYLOAD})`);
    } else if (opcode === OP_CONTINUATION) {
      if (this.messageOpcode < 0) throw new ProtocolViolation(1002, 'continuation frame with no message to continue');
    } else if (this.messageOpcode >= 0) {
      throw new ProtocolViolation(1002, 'new message before the fragmented one was finished');
    }
    this.fin = fin;
    this.opcode = opcode;
    this.payloadLeft = length;
    return size;
  }

  /** After a header whose payload is not handed out whole: starts keeping it. */
  private startPayload(): void {
    this.frameOpen = true;
    if (this.opcode >= OP_CLOSE) {
      this.controlLength = 0;
      return;
    }
    if (this.opcode !== OP_CONTINUATION) {
      this.messageOpcode = this.opcode;
      this.messageBytes = 0;
    }
    this.messageBytes += this.payloadLeft;
  }

  private keep(buffer: Buffer, at: number, count: number): void {
    if (this.opcode >= OP_CLOSE) {
      buffer.copy(this.control, this.controlLength, at, at + count);
      this.controlLength += count;
      return;
    }
    if (this.messageBytes > this.options.maxPayload) return; // skipped as it arrives
    if (this.assembled + count > this.assembly.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.options.maxPayload, Math.max(this.assembled + count, 2 * this.assembly.length, 64 * 1024)));
      this.assembly.copy(grown, 0, 0, this.assembled);
      this.assembly = grown;
    }
    buffer.copy(this.assembly, this.assembled, at, at + count);
    this.assembled += count;
  }

  private finishFrame(): void {
    this.frameOpen = false;
    if (this.opcode >= OP_CLOSE) return this.onControl(this.opcode, this.control.subarray(0, this.controlLength));
    if (!this.fin) return;
    const opcode = this.messageOpcode;
    const bytes = this.messageBytes;
    this.messageOpcode = -1;
    const message = this.assembly.subarray(0, this.assembled);
    this.assembled = 0;
    if (this.assembly.length > KEPT_ASSEMBLY_BYTES) this.assembly = Buffer.alloc(0);
    if (bytes > this.options.maxPayload) this.handlers.tooLarge(bytes);
    else this.handlers.message(message, opcode === OP_BINARY);
  }

  private onControl(opcode: number, payload: Buffer): void {
    if (opcode === OP_PING) {
      if (this.phase === 'open') this.socket.write(maskedFrame(OP_PONG, payload));
      return;
    }
    if (opcode === OP_PONG) return;
    let code = 1005;
    let reason = '';
    if (payload.length === 1) throw new ProtocolViolation(1002, 'close frame with a 1-byte payload');
    if (payload.length >= 2) {
      code = payload.readUInt16BE(0);
      if (!isValidCloseCode(code)) throw new ProtocolViolation(1002, `invalid close code ${code}`);
      const text = payload.subarray(2);
      if (!isUtf8(text)) throw new ProtocolViolation(1007, 'close reason is not valid UTF-8');
      reason = text.toString('utf8');
    }
    this.closeCode = code;
    this.closeReason = reason;
    // Echo the server's close (RFC 6455 5.5.1) unless this side began the handshake.
    if (!this.closeSent) this.sendClose(code === 1005 ? 1000 : code, '');
    // The server closes the TCP connection after a close handshake; it has sent all it will.
    this.phase = 'closing';
    this.socket.end();
  }

  private sendClose(code: number, reason: string): void {
    this.closeSent = true;
    this.phase = 'closing';
    this.socket.write(maskedFrame(OP_CLOSE, closePayload(code, reason)));
    this.closeTimer = setTimeout(() => this.terminate(), CLOSE_TIMEOUT_MS);
    this.closeTimer.unref();
  }

  /** Says why (`message`), closes with `code` and `reason`, and drops the connection. */
  private fail(code: number, reason: string, message: string): void {
    this.framesTrusted = false;
    this.handlers.error(new Error(message));
    this.closeCode = code;
    this.closeReason = reason;
    if (!this.closeSent && this.phase === 'open') this.socket.write(maskedFrame(OP_CLOSE, closePayload(code, reason)));
    this.closeSent = true;
    this.phase = 'closing';
    this.socket.end();
    this.closeTimer = setTimeout(() => this.terminate(), CLOSE_TIMEOUT_MS);
    this.closeTimer.unref();
  }

  private onSocketClosed(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    clearTimeout(this.handshakeTimer);
    clearTimeout(this.closeTimer);
    this.handlers.close(this.closeCode, this.closeReason);
  }
}

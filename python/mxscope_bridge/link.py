"""Protocol v1 trainer server (src/protocol/wire.ts, src/link/trainer-server.ts): numbers telemetry,
replays it on `subscribe {from}`, answers requests, and keeps the next-run config.

Training threads call `publish`, which never blocks: records wait in a bounded queue for the pump
thread (record_pump.py: JSON encoding, run log, sockets). When the queue holds `max_queued_stats` layerStats records,
further layerStats are dropped and counted; run, step and checkpoint records are always kept.

Who may connect (`_authorize`): a token is required unless the caller opts out with `no_token=True`
on loopback; it is generated when not given (or taken from MXSCOPE_TOKEN) and compared in constant
time. Upgrades that carry an `Origin` header come from browsers and are refused unless allow-listed.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import uuid
from collections import deque
from typing import Callable, Dict, List, Optional, Tuple

from .config import merge_run_config, next_run_problems
from .messages import read_frame
from .deferred import resolved
from .record_pump import RecordPump
from .runlog import compact
from .wsconnection import Connection, text_frame
from .wsserver import RateLimitedLog, Refusal, Request, WebSocketServer

from .protocol import PROTOCOL_VERSION

HARD_FRAME_BYTES = 16 * 1024 * 1024
"""Past this the websocket layer closes with 1009; up to it a frame is read, checked and dropped."""
MAX_CLIENT_FRAME_BYTES = 64 * 1024
"""Client frames this bridge parses. json.loads holds the GIL, so the training thread waits for it:
4 MiB of small values took 0.3-2 s, against 2 KB for the largest request (setNextRunConfig)."""
LISTENING_PREFIX = "MXSCOPE_LISTENING "
TOKEN_ENV = "MXSCOPE_TOKEN"
_IPV4_LOOPBACK = re.compile(r"127\.\d{1,3}\.\d{1,3}\.\d{1,3}")


def is_loopback(host: str) -> bool:
    bare = host.strip("[]")
    return bare in ("localhost", "::1") or _IPV4_LOOPBACK.fullmatch(bare) is not None


def choose_token(token: Optional[str], no_token: bool, host: str) -> Optional[str]:
    """The token clients must present: the one given, else $MXSCOPE_TOKEN, else a generated one;
    None only when the caller opted out explicitly, which is allowed on loopback alone."""
    if no_token:
        if token:
            raise ValueError("pass either token=... or no_token=True, not both")
        if not is_loopback(host):
            raise ValueError(f"no_token=True is allowed on loopback only, and {host} is not loopback: "
                             "leave the token on (it is generated and printed on the listening line)")
        return None
    if token in (None, "generate"):
        token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)
    if not isinstance(token, str) or not token.strip():
        raise ValueError("token must be a non-empty string (or pass no_token=True on loopback)")
    return token


def presented_token(request: Request) -> Optional[str]:
    """The token an upgrade presents: `Authorization: Bearer` (scheme in any case) or `?token=`."""
    scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.query.get("token")


def tokens_match(expected: str, given: Optional[str]) -> bool:
    """Constant time, on digests so the length does not leak either."""
    if given is None:
        return False
    return hmac.compare_digest(hashlib.sha256(expected.encode()).digest(), hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest())


class RequestError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


REPLAY_ENTRY_OVERHEAD = 128
"""Bytes an entry costs beyond its payload (bytes and tuple objects, header, deque slot), so the
replay bound is a bound on memory even for 150-byte step records."""


class ReplayBuffer:
    """Recent telemetry as ready websocket frames ((frame bytes, payload size), shared with every
    client's send queue: a frame is built once), bounded in bytes, oldest dropped first."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.frames: deque = deque()
        self.bytes = 0
        self.oldest_seq = 1

    def push(self, frame: tuple) -> None:
        self.frames.append(frame)
        self.bytes += frame[1] + REPLAY_ENTRY_OVERHEAD
        while self.bytes > self.max_bytes and len(self.frames) > 1:
            self.bytes -= self.frames.popleft()[1] + REPLAY_ENTRY_OVERHEAD
            self.oldest_seq += 1

    def since(self, start: int, max_bytes: int) -> Tuple[int, List[tuple]]:
        """(first seq, frames): the frames from seq `start` on, or from the oldest held, cut from the
        front to the newest `max_bytes`, which one connection may queue at once."""
        frames = list(self.frames)[max(0, start - self.oldest_seq):]
        total = sum(size for _, size in frames)
        skip = 0
        while total > max_bytes and skip < len(frames):
            total -= frames[skip][1]
            skip += 1
        return max(start, self.oldest_seq) + skip, frames[skip:]


def telemetry_frame(line: str, seq: int) -> str:
    """The frame of a record whose compact JSON is `line`: seq goes first."""
    return '{"seq":%d,%s' % (seq, line[1:])


#: What a telemetry frame adds to its record's compact JSON: the seq field and the websocket header.
FRAME_OVERHEAD = 64


def listed_within_a_frame(started: dict) -> Tuple[dict, Optional[int]]:
    """A runStarted record as published: every layer lists its sketch positions, unless that takes
    the record past the frame a client reads (20,000-27,000 layers at the default sketch of 64); then no
    layer does (protocol 1.7), and the size the listed record would have had comes with it. The
    sketches still follow the positions (layers.sketch_indices gives them)."""
    size = len(compact(started).encode()) + FRAME_OVERHEAD
    if size <= HARD_FRAME_BYTES:
        return started, None
    unlisted = [{key: value for key, value in layer.items() if key != "sketchIndices"} for layer in started["layers"]]
    return {**started, "layers": unlisted}, size


def too_large_for_clients(record: dict, size: int) -> str:
    """What a record over the frame size a client reads means, and for a runStarted (which then lists
    no sketch positions: ~69,000 layers or more) what shrinks it."""
    kind = record.get("type")
    said = f"a {kind} record of {size / 2 ** 20:.1f} MiB is over the {HARD_FRAME_BYTES // 2 ** 20} MiB a client reads: VS Code skips it"
    if kind != "runStarted":
        return said
    return (f"{said} and will not show the run, though it lists no layer's sketch positions. Fewer layers (include=/exclude=, "
            f"{len(record['layers'])} now) shrink it")


class _Peer:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.subscribed = False


class TrainerServer:
    def __init__(self, base_config: dict, *, host: str = "127.0.0.1", port: int = 0, token: Optional[str] = None,
                 no_token: bool = False, allowed_origins=(), trainer: Optional[dict] = None, replay_bytes: int = 256 << 20,
                 max_client_backlog_bytes: int = 64 << 20, max_queued_stats: int = 20000,
                 on_record_written: Optional[Callable[[dict, str], None]] = None, log: Callable[[str], None] = lambda line: None,
                 **server_limits):
        """`token`: what clients must present (None: $MXSCOPE_TOKEN or a generated one); `no_token=True`
        serves without one, on loopback only. `allowed_origins`: browser origins (e.g.
        "http://localhost:8888") allowed to connect; every other upgrade with an Origin gets 403.
        `server_limits`: WebSocketServer's max_clients, max_pending, handshake_timeout_s, poll_s."""
        self.token = choose_token(token, no_token, host)
        self.allowed_origins = frozenset(origin.lower().rstrip("/") for origin in allowed_origins)
        self.trainer = trainer or {"name": "mxscope-bridge", "version": "0.1.0"}
        self.session_id = str(uuid.uuid4())
        self.log = log
        self._connection_log = RateLimitedLog(log)  # refusals and violations: a client controls how many
        self.last_seq = 0
        self._lock = threading.RLock()
        self._peers: List[_Peer] = []
        self._replay = ReplayBuffer(replay_bytes)
        self._next_run_config = base_config
        self._on_record_written = on_record_written
        self._max_backlog = max_client_backlog_bytes
        self._handlers: Dict[str, Callable[[dict], Optional[str]]] = {}
        self._server = WebSocketServer(host, port, self._authorize, self._on_connection, max_client_backlog_bytes,
                                       log=self._connection_log, **server_limits)
        url_host = f"[{self._server.host}]" if ":" in self._server.host else self._server.host
        self.url = f"ws://{url_host}:{self._server.port}"
        self.connect_url = f"{self.url}/?token={self.token}" if self.token else self.url
        """The URL with its token, to paste into "MX Scope: Connect to Trainer" (as Jupyter prints one)."""
        self._pump = RecordPump(self._number_and_send, log, max_queued_stats)

    # ------------------------------------------------------------------ training side

    @property
    def next_run_config(self) -> dict:
        with self._lock:
            return self._next_run_config

    def set_next_run_config(self, config: dict) -> None:
        with self._lock:
            self._next_run_config = config
            self._broadcast({"type": "nextRunConfig", "seq": self.last_seq, "config": config})

    def handle(self, request_type: str, handler: Callable[[dict], Optional[str]]) -> None:
        """Serve startRun/stopRun/saveCheckpoint: the handler returns the ack detail or raises RequestError."""
        self._handlers[request_type] = handler

    @property
    def capabilities(self) -> List[str]:
        return ["layerStats", "wgradError", "replay", "nextRunConfig", *self._handlers]

    def listening_line(self) -> str:
        # The URL carries the token, as Jupyter prints it: one thing to paste into Connect to Trainer.
        info = {"url": self.connect_url, **({"token": self.token} if self.token else {}), "protocol": "%d.%d" % (PROTOCOL_VERSION["major"], PROTOCOL_VERSION["minor"])}
        return LISTENING_PREFIX + json.dumps(info, separators=(",", ":"))

    @property
    def dropped_stats(self) -> int:
        return self._pump.dropped_stats

    def publish(self, record) -> bool:
        """Queue a telemetry record, or a batch of layerStats records that the pump builds (an object
        with `count` and `records()`, e.g. step_stats.StepStats); never blocks. False when layerStats
        were dropped: all of a batch that does not fit under max_queued_stats."""
        return self._pump.publish(record)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued record is numbered, logged and handed to the sockets."""
        return self._pump.flush(timeout)

    def close(self) -> None:
        self._pump.close()
        self._server.close()
        with self._lock:
            for peer in self._peers:
                peer.conn.close(1001, "trainer shutting down")

    # ------------------------------------------------------------------ pump thread

    def _number_and_send(self, record: dict) -> None:
        # Encoded once for the socket and the run log.
        line = compact(resolved(record))
        frame = text_frame(telemetry_frame(line, self.last_seq + 1))
        if frame[1] > HARD_FRAME_BYTES:
            self.log(too_large_for_clients(record, frame[1]))
        with self._lock:
            self.last_seq += 1
            self._replay.push(frame)
            for peer in list(self._peers):
                if peer.subscribed and not peer.conn.send_frame(*frame):
                    if peer.conn.close_code == 1013:
                        self._connection_log("closed a client that fell too far behind; it can reconnect and subscribe from its last seq")
                    self._peers.remove(peer)  # closing, for whatever reason: it gets nothing more
        if self._on_record_written is not None:
            self._on_record_written(record, line)

    # ------------------------------------------------------------------ connections

    def _authorize(self, request: Request) -> Optional[Refusal]:
        origin = request.headers.get("origin")
        if origin is not None and origin.lower().rstrip("/") not in self.allowed_origins:
            self._connection_log(f"refused a connection from {request.peer}: browser origin {origin[:200]!r} is not allow-listed")
            return 403, ("upgrades from web pages are refused (Origin header present); MX Scope clients send no Origin. "
                         "Allow-list an origin with allowed_origins=[...] if a page must connect")
        if self.token and not tokens_match(self.token, presented_token(request)):
            self._connection_log(f"refused a connection from {request.peer}: missing or wrong token")
            return 401, 'a valid token is required (query parameter "token" or header "Authorization: Bearer <token>")'
        return None

    def _send(self, peer: _Peer, message: dict) -> None:
        peer.conn.send_text(json.dumps(message, separators=(",", ":"), allow_nan=False))

    def _error(self, peer: _Peer, code: str, message: str, request_id=None) -> None:
        self._send(peer, {"type": "error", "seq": self.last_seq, **({"id": request_id} if request_id is not None else {}), "code": code, "message": message})

    def _broadcast(self, message: dict) -> None:
        for peer in self._peers:
            if peer.subscribed:
                self._send(peer, message)

    def _on_connection(self, conn: Connection, request: Request) -> None:
        peer = _Peer(conn)
        with self._lock:
            self._peers.append(peer)
            self._send(peer, {"type": "hello", "seq": self.last_seq, "protocol": PROTOCOL_VERSION, "trainer": self.trainer,
                              "sessionId": self.session_id, "capabilities": self.capabilities, "lastSeq": self.last_seq})
        try:
            conn.read_messages(lambda text, size: self._on_message(peer, text, size), MAX_CLIENT_FRAME_BYTES, HARD_FRAME_BYTES)
        finally:
            with self._lock:
                if peer in self._peers:
                    self._peers.remove(peer)

    def _on_message(self, peer: _Peer, text: Optional[str], size: int) -> None:
        if text is None:
            if size < 0:
                return self._error(peer, "invalid-message", "binary frame dropped: protocol v1 frames are JSON text")
            return self._error(peer, "frame-too-large", f"frame of {size} bytes is over this trainer's {MAX_CLIENT_FRAME_BYTES}-byte limit "
                               "for client messages (requests are a few KB); dropped")
        frame = read_frame(text, "client")
        message = frame.value
        if frame.kind == "unknown":
            return self.log(f'ignored a client message of unknown type "{message["type"][:64]}" (newer client?)')
        if frame.kind == "invalid":
            what = "frame is not valid JSON ({}); dropped" if frame.code == "bad-json" else "{}; message dropped"
            return self._error(peer, frame.code, what.format(frame.reason[:1000]), _request_id(message))
        request_id = message["id"]
        try:
            detail = self._handle(peer, message)
            if detail is not _REPLIED:
                self._send(peer, {"type": "ack", "seq": self.last_seq, "id": message["id"], **({"detail": detail} if detail is not None else {})})
        except RequestError as error:
            prefix = "" if error.code == "invalid-message" else f"{message['type']}: "
            self._error(peer, error.code, prefix + str(error), request_id)
            if error.code == "incompatible-version":
                peer.conn.close(1002, "incompatible protocol version")
        except Exception as error:  # a handler's bug is the client's 'internal' error, not a dead thread
            self.log(f"{message.get('type')} failed: {error!r}")
            self._error(peer, "internal", f"{message.get('type')}: {error}", request_id)

    def _handle(self, peer: _Peer, message: dict):
        kind = message["type"]
        if kind == "hello":
            theirs = message["protocol"]
            if theirs["major"] != PROTOCOL_VERSION["major"]:
                raise RequestError("incompatible-version", f"protocol {theirs['major']}.{theirs['minor']} is not compatible with this server's {PROTOCOL_VERSION['major']}.{PROTOCOL_VERSION['minor']}: use a client for protocol major version {PROTOCOL_VERSION['major']}")
            return f"{self.trainer['name']} {self.trainer['version']}"
        if kind == "subscribe":
            with self._lock:
                start = max(1, message.get("from", self.last_seq + 1))
                # Half the client's backlog at most, so a replay never closes the client with 1013
                # (it would reconnect and ask for the same replay again).
                first, frames = self._replay.since(start, self._max_backlog // 2)
                for frame in frames:
                    peer.conn.send_frame(*frame)
                peer.subscribed = True
                detail = f"replayed from seq {min(first, self.last_seq + 1)}"
                if start < first <= self.last_seq:
                    why = ("no longer held" if first == self._replay.oldest_seq
                           else f"over the {self._max_backlog / 2**21:g} MiB one connection may queue at once")
                    detail = f"replayed from seq {first}: seqs {start}..{first - 1} are {why}"
                self._send(peer, {"type": "ack", "seq": self.last_seq, "id": message["id"], "detail": detail})
                self._send(peer, {"type": "nextRunConfig", "seq": self.last_seq, "config": self._next_run_config})
            return _REPLIED
        if kind == "setNextRunConfig":
            with self._lock:
                merged = merge_run_config(self._next_run_config, message["change"])
                refusal = next_run_problems(merged)
                if refusal:  # refused when configured, naming what to change, not when the run starts
                    raise RequestError("invalid-message", refusal)
                self.set_next_run_config(merged)
            return "applies at the next run start"
        handler = self._handlers.get(kind)
        if handler is None:
            raise RequestError("not-supported", f"this trainer does not serve {kind}")
        return handler(message)


_REPLIED = object()
def _request_id(message) -> Optional[str]:
    """The id to answer an invalid request with: its own, when it has a usable one."""
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, str) and len(request_id) <= 128 else None

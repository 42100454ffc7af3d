"""Protocol v1 trainer server (src/protocol/wire.ts, src/link/trainer-server.ts): numbers telemetry,
replays it on `subscribe {from}`, answers requests, and keeps the next-run config.

Training threads call `publish`, which never blocks: records wait in a bounded queue for the pump
thread (JSON encoding, run log, sockets). When the queue holds `max_queued_stats` layerStats records,
further layerStats are dropped and counted; run, step and checkpoint records are always kept.
"""
from __future__ import annotations

import hmac
import json
import queue
import secrets
import threading
import uuid
from collections import deque
from typing import Callable, Dict, List, Optional

from .config import ConfigError, check_next_run_config, merge_run_config
from .runlog import compact
from .wsserver import Connection, Request, WebSocketServer

PROTOCOL_VERSION = {"major": 1, "minor": 1}
MAX_FRAME_BYTES = 4 * 1024 * 1024
CLIENT_MESSAGE_TYPES = ("hello", "subscribe", "setNextRunConfig", "startRun", "stopRun", "saveCheckpoint")
LISTENING_PREFIX = "MXSCOPE_LISTENING "


def is_loopback(host: str) -> bool:
    bare = host.strip("[]")
    return bare in ("localhost", "::1") or bare.startswith("127.")


class RequestError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class ReplayBuffer:
    """Recent telemetry frames, bounded by bytes (oldest dropped first)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.frames: deque = deque()
        self.bytes = 0
        self.oldest_seq = 1

    def push(self, frame: str) -> None:
        self.frames.append(frame)
        self.bytes += len(frame)
        while self.bytes > self.max_bytes and len(self.frames) > 1:
            self.bytes -= len(self.frames.popleft())
            self.oldest_seq += 1

    def since(self, start: int) -> List[str]:
        return list(self.frames)[max(0, start - self.oldest_seq):]


def telemetry_frame(line: str, seq: int) -> str:
    """The frame of a record whose compact JSON is `line`: seq goes first."""
    return '{"seq":%d,%s' % (seq, line[1:])


class _Peer:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.subscribed = False


class TrainerServer:
    def __init__(self, base_config: dict, *, host: str = "127.0.0.1", port: int = 0, token: Optional[str] = None,
                 trainer: Optional[dict] = None, replay_bytes: int = 256 << 20, max_client_backlog_bytes: int = 64 << 20,
                 max_queued_stats: int = 20000, on_record_written: Optional[Callable[[dict, str], None]] = None,
                 log: Callable[[str], None] = lambda line: None):
        if not is_loopback(host) and not token:
            raise ValueError(f"binding to {host} (not loopback) needs a token: pass token=... or token='generate'")
        self.token = secrets.token_urlsafe(24) if token == "generate" else token
        self.trainer = trainer or {"name": "mxscope-bridge", "version": "0.1.0"}
        self.session_id = str(uuid.uuid4())
        self.log = log
        self.last_seq = 0
        self.dropped_stats = 0
        self._max_queued_stats = max_queued_stats
        self._queued_stats = 0
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._lock = threading.RLock()
        self._peers: List[_Peer] = []
        self._replay = ReplayBuffer(replay_bytes)
        self._next_run_config = base_config
        self._on_record_written = on_record_written
        self._handlers: Dict[str, Callable[[dict], Optional[str]]] = {}
        self._idle = threading.Condition()
        self._pending = 0
        self._server = WebSocketServer(host, port, self._authorize, self._on_connection, max_client_backlog_bytes)
        url_host = f"[{self._server.host}]" if ":" in self._server.host else self._server.host
        self.url = f"ws://{url_host}:{self._server.port}"
        threading.Thread(target=self._pump, name="mxscope-publisher", daemon=True).start()

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
        info = {"url": self.url, **({"token": self.token} if self.token else {}), "protocol": "%d.%d" % (PROTOCOL_VERSION["major"], PROTOCOL_VERSION["minor"])}
        return LISTENING_PREFIX + json.dumps(info, separators=(",", ":"))

    def publish(self, record: dict) -> bool:
        """Queue a telemetry record (never blocks); False when a layerStats record was dropped."""
        is_stats = record.get("type") == "layerStats"
        if is_stats:
            with self._idle:
                if self._queued_stats >= self._max_queued_stats:
                    self.dropped_stats += 1
                    return False
                self._queued_stats += 1
        with self._idle:
            self._pending += 1
        self._queue.put(record)
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued record is numbered, logged and handed to the sockets."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self) -> None:
        self.flush()
        self._server.close()
        with self._lock:
            for peer in self._peers:
                peer.conn.close(1001, "trainer shutting down")

    # ------------------------------------------------------------------ pump thread

    def _pump(self) -> None:
        while True:
            record = self._queue.get()
            try:
                # Encoded once for the socket and the run log: a stats step's records hold the GIL
                # while they encode, which the training thread waits for.
                line = compact(record)
                frame = telemetry_frame(line, self.last_seq + 1)
                with self._lock:
                    self.last_seq += 1
                    self._replay.push(frame)
                    for peer in list(self._peers):
                        if peer.subscribed and not peer.conn.send_text(frame):
                            self.log("closed a client that fell too far behind; it can reconnect and subscribe from its last seq")
                            self._peers.remove(peer)
                if self._on_record_written is not None:
                    self._on_record_written(record, line)
            except Exception as error:  # a bad record must not kill the pump
                self.log(f"could not publish a {record.get('type')} record: {error}")
            finally:
                with self._idle:
                    if record.get("type") == "layerStats":
                        self._queued_stats -= 1
                    self._pending -= 1
                    self._idle.notify_all()

    # ------------------------------------------------------------------ connections

    def _authorize(self, request: Request) -> Optional[str]:
        if not self.token:
            return None
        auth = request.headers.get("authorization", "")
        given = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else request.query.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        self.log(f"refused a connection from {request.peer}: missing or wrong token")
        return 'a valid token is required (query parameter "token" or header "Authorization: Bearer <token>")'

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
        conn.read_messages(lambda text, size: self._on_message(peer, text, size), MAX_FRAME_BYTES, 4 * MAX_FRAME_BYTES)
        with self._lock:
            if peer in self._peers:
                self._peers.remove(peer)

    def _on_message(self, peer: _Peer, text: Optional[str], size: int) -> None:
        if text is None:
            if size < 0:
                return self._error(peer, "invalid-message", "binary frame dropped: protocol v1 frames are JSON text")
            return self._error(peer, "frame-too-large", f"frame of {size} bytes is over the {MAX_FRAME_BYTES}-byte limit; dropped")
        try:
            message = json.loads(text)
        except ValueError as error:
            return self._error(peer, "bad-json", f"frame is not valid JSON ({error}); dropped")
        if isinstance(message, dict) and isinstance(message.get("type"), str) and message["type"] not in CLIENT_MESSAGE_TYPES:
            return self.log(f'ignored a client message of unknown type "{message["type"]}" (newer client?)')
        request_id = message.get("id") if isinstance(message, dict) and isinstance(message.get("id"), str) else None
        try:
            problem = _check_client_message(message)
            if problem:
                raise RequestError("invalid-message", f"{problem}; message dropped")
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
                raise RequestError("incompatible-version", f"protocol {theirs['major']}.{theirs['minor']} is not compatible with this server's 1.1: use a client for protocol major version 1")
            return f"{self.trainer['name']} {self.trainer['version']}"
        if kind == "subscribe":
            with self._lock:
                start = message.get("from", self.last_seq + 1)
                for frame in self._replay.since(start):
                    peer.conn.send_text(frame)
                peer.subscribed = True
                gap = start < self._replay.oldest_seq and self.last_seq > 0
                detail = (f"replayed from seq {self._replay.oldest_seq}: seqs {start}..{self._replay.oldest_seq - 1} are no longer held" if gap
                          else f"replayed from seq {min(start, self.last_seq + 1)}")
                self._send(peer, {"type": "ack", "seq": self.last_seq, "id": message["id"], "detail": detail})
                self._send(peer, {"type": "nextRunConfig", "seq": self.last_seq, "config": self._next_run_config})
            return _REPLIED
        if kind == "setNextRunConfig":
            with self._lock:
                self.set_next_run_config(merge_run_config(self._next_run_config, message["change"]))
            return "applies at the next run start"
        handler = self._handlers.get(kind)
        if handler is None:
            raise RequestError("not-supported", f"this trainer does not serve {kind}")
        return handler(message)


_REPLIED = object()


def _check_client_message(message) -> Optional[str]:
    """clientMessageSchema's checks; returns what is wrong, or None."""
    if not isinstance(message, dict):
        return "message: expected an object"
    kind = message.get("type")
    if kind not in CLIENT_MESSAGE_TYPES:
        return f"message.type: expected one of {', '.join(CLIENT_MESSAGE_TYPES)}, got {kind!r}"
    if not isinstance(message.get("id"), str) or not 0 < len(message["id"]) <= 128:
        return "message.id: expected a string of 1..128 characters"
    if kind == "hello":
        protocol, client = message.get("protocol"), message.get("client")
        if not isinstance(protocol, dict) or not all(_is_int(protocol.get(k), 0, 1000) for k in ("major", "minor")):
            return "message.protocol: expected {major, minor} integers in [0, 1000]"
        if not isinstance(client, dict) or not all(isinstance(client.get(k), str) for k in ("name", "version")):
            return "message.client: expected {name, version} strings"
    elif kind == "subscribe" and "from" in message and not _is_int(message["from"], 0, 2**53 - 1):
        return "message.from: expected a non-negative integer"
    elif kind == "setNextRunConfig":
        try:
            check_next_run_config(message.get("change"), "message.change")
        except ConfigError as error:
            return str(error)
    elif kind == "startRun" and "fromCheckpoint" in message and not isinstance(message["fromCheckpoint"], str):
        return "message.fromCheckpoint: expected a string"
    return None


def _is_int(value, low, high) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

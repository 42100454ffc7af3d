"""A small RFC 6455 websocket server on the standard library, built to live inside a training process.

Why not the `websockets` package: a bridge runs inside other people's training jobs and clusters
(and the GPU image here has no `websockets`), where every extra dependency is a reason not to
install it; Debian's 10.4 has no threaded server either. The server needs a handshake, frames
(`wsframes.py`) and per-connection threads (`wsconnection.py`).

Bounded whatever clients do: one thread accepts connections and reads every upgrade request with a
selector (an idle socket costs no thread and is dropped after `handshake_timeout_s`); at most
`max_pending` sockets wait for their upgrade and `max_clients` are connected (each with a reader and
a writer thread); anything over is refused with 503. Refusals are plain HTTP answers before any
websocket exists: 400 malformed upgrade, 401 token, 403 browser origin, 426 wrong version.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import selectors
import socket
import threading
import time
from typing import Callable, Dict, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from .cpubudget import CpuBudget
from .wsconnection import Connection

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
ACCEPT_CPU_SHARE = 0.1
"""The accept thread's share of a core: a flood of connections waits in the kernel's listen queue."""
MAX_HANDSHAKE_BYTES = 16 * 1024
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 426: "Upgrade Required", 503: "Service Unavailable"}

Refusal = Tuple[int, str]
"""(HTTP status, reason shown to the client) for an upgrade that is refused."""


class Request:
    """The upgrade request: its path, query parameters and (lower-cased) headers."""

    def __init__(self, target: str, headers: Dict[str, str], peer: str):
        parts = urlsplit(target)
        self.path = parts.path
        self.query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        self.headers = headers
        self.peer = peer


def parse_request(data: bytes) -> Tuple[str, str, Dict[str, str]]:
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    method, target, version = (head[0].split(" ") + ["", ""])[:3]
    if not version.startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.1 request")
    headers: Dict[str, str] = {}
    for line in head[1:]:
        key, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"malformed header line {line[:40]!r}")
        key = key.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return method, target, headers


def _tokens(value: str) -> set:
    return {part.strip().lower() for part in value.split(",")}


def upgrade_problem(method: str, headers: Dict[str, str]) -> Optional[Refusal]:
    """What makes this request not a websocket upgrade (RFC 6455 4.2.1), or None."""
    if method != "GET":
        return 400, "a websocket upgrade is a GET request"
    if "websocket" not in _tokens(headers.get("upgrade", "")) or "upgrade" not in _tokens(headers.get("connection", "")):
        return 426, "this is a websocket endpoint (MX Scope protocol v1): send Upgrade: websocket"
    if headers.get("sec-websocket-version") != "13":
        return 426, "only websocket version 13 is supported"
    try:
        if len(base64.b64decode(headers.get("sec-websocket-key", ""), validate=True)) != 16:
            raise ValueError
    except (ValueError, binascii.Error):
        return 400, "Sec-WebSocket-Key must be 16 bytes in base64"
    return None


def _keep_alive(sock: socket.socket) -> None:
    """A client that vanished (laptop asleep, tunnel dropped) frees its slot within about two minutes."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def http_reply(sock: socket.socket, status: int, body: str) -> None:
    payload = body.encode("utf-8")
    extra = "Sec-WebSocket-Version: 13\r\n" if status == 426 else ""
    head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(payload)}\r\n{extra}Connection: close\r\n\r\n")
    try:
        sock.settimeout(1.0)
        sock.sendall(head.encode() + payload)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        sock.close()


class RateLimitedLog:
    """Passes at most `per_second` lines a second to `log`; the others are counted and the count goes
    out with the next line that passes, so a client that is refused in a loop cannot flood stderr."""

    def __init__(self, log: Callable[[str], None], per_second: int = 5):
        self._log = log
        self._per_second = per_second
        self._window = 0.0
        self._sent = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._window >= 1.0:
                self._window, self._sent = now, 0
            if self._sent >= self._per_second:
                self._suppressed += 1
                return
            self._sent += 1
            suppressed, self._suppressed = self._suppressed, 0
        self._log(line if not suppressed else f"{line} ({suppressed} similar lines suppressed)")


class _Pending:
    def __init__(self, addr, deadline: float):
        self.addr = addr
        self.deadline = deadline
        self.data = b""


class WebSocketServer:
    """Accepts websocket upgrades on (host, port). `authorize(request)` returns None to accept or a
    Refusal; `on_connection(conn, request)` runs on the connection's reader thread and returns
    when the connection is over (it calls `conn.read_messages`)."""

    def __init__(self, host: str, port: int, authorize: Callable[[Request], Optional[Refusal]],
                 on_connection: Callable[[Connection, Request], None], max_backlog_bytes: int, *,
                 max_clients: int = 16, max_pending: int = 64, handshake_timeout_s: float = 5.0,
                 poll_s: float = 1.0, log: Callable[[str], None] = lambda line: None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._authorize = authorize
        self._on_connection = on_connection
        self._max_backlog = max_backlog_bytes
        self.max_clients = max_clients
        self.max_pending = max_pending
        self.handshake_timeout_s = handshake_timeout_s
        self._poll_s = poll_s
        self._log = log
        self._clients = 0
        self._clients_lock = threading.Lock()
        self.pending_count = 0
        self._stopped = threading.Event()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._thread = threading.Thread(target=self._accept_loop, name="mxscope-ws-accept", daemon=True)
        self._thread.start()

    @property
    def client_count(self) -> int:
        return self._clients

    # ------------------------------------------------------------------ accept thread

    def _accept_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "listener")
        selector.register(self._wake_reader, selectors.EVENT_READ, "wake")
        pending: Dict[socket.socket, _Pending] = {}
        budget = CpuBudget(ACCEPT_CPU_SHARE)
        try:
            while not self._stopped.is_set():
                timeout = max(0.0, min(p.deadline for p in pending.values()) - time.monotonic()) if pending else None
                events = selector.select(timeout)
                started = time.thread_time()
                for key, _ in events:
                    if key.data == "listener":
                        self._accept_all(selector, pending)
                    elif key.data == "pending":
                        self._read_upgrade(selector, pending, key.fileobj)
                now = time.monotonic()
                for sock in [s for s, p in pending.items() if p.deadline <= now]:
                    self._drop_pending(selector, pending, sock)  # never finished its upgrade: no answer owed
                self.pending_count = len(pending)
                budget.charge(time.thread_time() - started)
        finally:
            for sock in list(pending):
                self._drop_pending(selector, pending, sock)
            self.pending_count = 0
            selector.close()

    def _accept_all(self, selector, pending: Dict[socket.socket, _Pending]) -> None:
        while True:
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # EMFILE and the like: the next select tries again
                self._log(f"accept failed: {error}")
                time.sleep(0.05)
                return
            if len(pending) >= self.max_pending:
                http_reply(sock, 503, f"too many connections waiting for their upgrade ({self.max_pending}): try again shortly")
                continue
            sock.setblocking(False)
            pending[sock] = _Pending(addr, time.monotonic() + self.handshake_timeout_s)
            selector.register(sock, selectors.EVENT_READ, "pending")

    def _drop_pending(self, selector, pending: Dict[socket.socket, _Pending], sock: socket.socket) -> None:
        selector.unregister(sock)
        del pending[sock]
        sock.close()

    def _read_upgrade(self, selector, pending: Dict[socket.socket, _Pending], sock: socket.socket) -> None:
        state = pending[sock]
        try:
            chunk = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            return self._drop_pending(selector, pending, sock)
        state.data += chunk
        if b"\r\n\r\n" not in state.data and len(state.data) <= MAX_HANDSHAKE_BYTES:
            return
        selector.unregister(sock)
        del pending[sock]
        try:
            self._upgrade(sock, state)
        except Exception as error:  # one bad request must never stop the accept thread
            self._log(f"refused an upgrade from {state.addr[0]}: {error!r}")
            http_reply(sock, 400, "malformed upgrade request")

    def _upgrade(self, sock: socket.socket, state: _Pending) -> None:
        if b"\r\n\r\n" not in state.data[:MAX_HANDSHAKE_BYTES + 4]:
            return http_reply(sock, 400, f"upgrade request over {MAX_HANDSHAKE_BYTES} bytes")
        head, rest = state.data.split(b"\r\n\r\n", 1)
        method, target, headers = parse_request(head)
        refusal = upgrade_problem(method, headers)
        request = Request(target, headers, f"{state.addr[0]}:{state.addr[1]}")
        refusal = refusal or self._authorize(request)
        if refusal is None:
            with self._clients_lock:
                if self._clients >= self.max_clients:
                    refusal = 503, f"this trainer already serves {self.max_clients} clients: close one and retry"
                else:
                    self._clients += 1
        if refusal is not None:
            return http_reply(sock, *refusal)
        accept = base64.b64encode(hashlib.sha1((headers["sec-websocket-key"] + GUID).encode()).digest()).decode()
        try:
            sock.settimeout(1.0)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _keep_alive(sock)
            sock.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".encode())
        except OSError:
            sock.close()
            return self._release()
        try:
            threading.Thread(target=self._serve, args=(sock, request, rest), name="mxscope-ws-reader", daemon=True).start()
        except RuntimeError as error:  # the process is out of threads: this client only goes
            self._log(f"could not serve {request.peer}: {error}")
            sock.close()
            self._release()

    # ------------------------------------------------------------------ one connection's reader thread

    def _serve(self, sock: socket.socket, request: Request, initial: bytes) -> None:
        conn = None
        try:
            conn = Connection(sock, self._max_backlog, initial, poll_s=self._poll_s, log=self._log)
            self._on_connection(conn, request)
        except Exception as error:
            self._log(f"connection from {request.peer} ended with an error: {error!r}")
        finally:
            if conn is not None and not conn.closed.is_set():
                conn.close(1011, "internal error", discard_pending=True)
                conn.read_messages(lambda text, size: None, 0, 0)  # finishes it: bounded by the close grace
            elif conn is None:
                sock.close()
            self._release()

    def _release(self) -> None:
        with self._clients_lock:
            self._clients -= 1

    def close(self) -> None:
        self._stopped.set()
        try:
            self._wake_writer.send(b"x")
        except OSError:
            pass
        self._thread.join(5)
        for sock in (self._listener, self._wake_reader, self._wake_writer):
            sock.close()

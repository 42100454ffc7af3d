"""A small RFC 6455 websocket server on the standard library: text frames, ping/pong, close.

Why not the `websockets` package: a bridge runs inside other people's training jobs and clusters
(and the GPU image here has no `websockets`), where every extra dependency is a reason not to
install it; the server needs only a handshake, unmasking and frame headers. Each connection has a
reader thread and a writer thread with its own outbound queue, so a slow client never blocks the
thread that publishes.
"""
from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
from collections import deque
from typing import Callable, Dict, Optional
from urllib.parse import parse_qs, urlsplit

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_HANDSHAKE_BYTES = 16 * 1024


class Request:
    """The upgrade request: its path, query parameters and (lower-cased) headers."""

    def __init__(self, target: str, headers: Dict[str, str], peer: str):
        parts = urlsplit(target)
        self.path = parts.path
        self.query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        self.headers = headers
        self.peer = peer


class Connection:
    def __init__(self, sock: socket.socket, max_backlog_bytes: int):
        self._sock = sock
        self._out: deque = deque()
        self._backlog = 0
        self._max_backlog = max_backlog_bytes
        self._cond = threading.Condition()
        self._closing = False
        self.closed = threading.Event()
        threading.Thread(target=self._write_loop, name="mxscope-ws-writer", daemon=True).start()

    @property
    def backlog_bytes(self) -> int:
        return self._backlog

    def send_text(self, text: str) -> bool:
        """Queue a text frame; False (and the connection closes with 1013) when the client is too far behind."""
        payload = text.encode("utf-8")
        with self._cond:
            if self._closing:
                return False
            if self._backlog + len(payload) > self._max_backlog:
                self._close_locked(1013, "too far behind: reconnect and subscribe from your last seq")
                return False
            self._out.append(_frame(OP_TEXT, payload))
            self._backlog += len(payload)
            self._cond.notify()
        return True

    def close(self, code: int = 1000, reason: str = "") -> None:
        with self._cond:
            self._close_locked(code, reason)

    def _close_locked(self, code: int, reason: str) -> None:
        if self._closing:
            return
        self._closing = True
        self._out.append(_frame(OP_CLOSE, struct.pack(">H", code) + reason.encode("utf-8")[:120]))
        self._out.append(None)  # after the close frame, shut the socket
        self._cond.notify()

    def _send_control(self, opcode: int, payload: bytes) -> None:
        with self._cond:
            if not self._closing:
                self._out.append(_frame(opcode, payload))
                self._cond.notify()

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._out:
                        self._cond.wait()
                    frame = self._out.popleft()
                    if frame is not None:
                        self._backlog = max(0, self._backlog - max(0, len(frame) - 10))
                if frame is None:
                    break
                self._sock.sendall(frame)
        except OSError:
            pass
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        with self._cond:
            self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self.closed.set()

    def read_messages(self, on_text: Callable[[Optional[str], int], None], max_message_bytes: int, hard_limit_bytes: int) -> None:
        """Calls on_text(text, size) per message; text is None for a message over max_message_bytes
        (read and dropped) or a binary one (size -1). Returns when the connection ends."""
        reader = _Reader(self._sock)
        parts: list = []
        size = 0
        binary = False
        try:
            while True:
                fin, opcode, length = reader.header()
                if opcode >= OP_CLOSE:
                    payload = reader.payload(length)
                    if opcode == OP_CLOSE:
                        self.close(struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1000)
                        return
                    if opcode == OP_PING:
                        self._send_control(OP_PONG, payload)
                    continue
                if opcode != OP_CONT:
                    parts, size, binary = [], 0, opcode == OP_BINARY
                size += length
                if size > hard_limit_bytes:
                    self.close(1009, "message too big")
                    return
                if size > max_message_bytes or binary:
                    reader.skip(length)
                    parts = []
                else:
                    parts.append(reader.payload(length))
                if fin:
                    if binary:
                        on_text(None, -1)
                    elif size > max_message_bytes:
                        on_text(None, size)
                    else:
                        on_text(b"".join(parts).decode("utf-8", errors="replace"), size)
        except (OSError, EOFError, ValueError):
            self.close(1002, "protocol error")
        finally:
            self.closed.wait(timeout=5)


class _Reader:
    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._mask = b""

    def _exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise EOFError("connection closed")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def header(self):
        b0, b1 = self._exact(2)
        if not b1 & 0x80:
            raise ValueError("client frames must be masked")
        length = b1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._exact(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self._exact(8))[0]
        self._mask = self._exact(4)
        return bool(b0 & 0x80), b0 & 0x0F, length

    def payload(self, length: int) -> bytes:
        data = self._exact(length)
        if not length:
            return b""
        mask_bytes = (self._mask * (length // 4 + 1))[:length]
        return (int.from_bytes(data, "big") ^ int.from_bytes(mask_bytes, "big")).to_bytes(length, "big")

    def skip(self, length: int) -> None:
        while length:
            length -= len(self._exact(min(length, 1 << 20)))


def _frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        header = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        header = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        header = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    return header + payload


def _read_request(sock: socket.socket) -> tuple:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) > MAX_HANDSHAKE_BYTES:
            raise ValueError("incomplete or oversized upgrade request")
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    method, target, _ = (head[0].split(" ") + ["", ""])[:3]
    headers = {}
    for line in head[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return method, target, headers


def _http_reply(sock: socket.socket, status: str, body: str) -> None:
    payload = body.encode("utf-8")
    sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
    sock.close()


class WebSocketServer:
    """Accepts websocket upgrades on (host, port); `authorize(request)` returns None to accept or
    the reason to refuse with HTTP 401; `on_connection(conn, request)` runs on the reader thread."""

    def __init__(self, host: str, port: int, authorize: Callable[[Request], Optional[str]],
                 on_connection: Callable[[Connection, Request], None], max_backlog_bytes: int):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(16)
        self.host, self.port = self._listener.getsockname()[:2]
        self._authorize = authorize
        self._on_connection = on_connection
        self._max_backlog = max_backlog_bytes
        self._stopped = threading.Event()
        threading.Thread(target=self._accept_loop, name="mxscope-ws-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, addr = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock, addr), name="mxscope-ws-conn", daemon=True).start()

    def _serve(self, sock: socket.socket, addr) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            method, target, headers = _read_request(sock)
            key = headers.get("sec-websocket-key")
            if method != "GET" or headers.get("upgrade", "").lower() != "websocket" or not key:
                return _http_reply(sock, "426 Upgrade Required", "this is a websocket endpoint (MX Scope protocol v1)")
            request = Request(target, headers, f"{addr[0]}:{addr[1]}")
            refusal = self._authorize(request)
            if refusal is not None:
                return _http_reply(sock, "401 Unauthorized", refusal)
            accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            sock.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".encode())
        except (OSError, ValueError):
            sock.close()
            return
        self._on_connection(Connection(sock, self._max_backlog), request)

    def close(self) -> None:
        self._stopped.set()
        try:
            self._listener.close()
        except OSError:
            pass

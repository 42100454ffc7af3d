"""One websocket client of the bridge: a writer thread drains a bounded queue, the thread that calls
`read_messages` reads; when reading ends, for whatever reason, the connection is finished within
a bounded time (close frame sent or given up on, socket closed), so no thread, fd or socket leaks.

Memory a client can make the training process hold: its unsent backlog (`max_backlog_bytes`, then
1013), one pending pong (RFC 6455 5.5.3 lets a server answer only the latest ping), and the one
message being assembled (`max_message_bytes`; bigger ones are checked and dropped, not kept).
CPU: reading and handling a client's messages is held to `MESSAGE_CPU_SHARE` of one core
(`cpubudget.py`): past it the reader sleeps, so neither one expensive message nor a flood of cheap
ones takes the GIL from the training thread for long.
"""
from __future__ import annotations

import socket
import threading
import time
from collections import deque
from typing import Callable, Optional

from .cpubudget import CpuBudget
from .wsframes import (OP_CLOSE, OP_PONG, OP_TEXT, MessageReader, ProtocolViolation, SocketBytes,
                       close_payload, encode_frame)

MESSAGE_CPU_SHARE = 0.1
_SEND_CHUNK = 1 << 18
_MAX_DRAIN_BYTES = 1 << 20


def text_frame(text: str) -> tuple:
    """(frame bytes, payload size) of a text message: build once, send to many connections."""
    payload = text.encode("utf-8")
    return encode_frame(OP_TEXT, payload), len(payload)


class Connection:
    def __init__(self, sock: socket.socket, max_backlog_bytes: int, initial: bytes = b"", *,
                 poll_s: float = 1.0, close_grace_s: float = 2.0, log: Callable[[str], None] = lambda line: None):
        sock.settimeout(poll_s)  # every blocking call wakes this often to see whether to give up
        self._sock = sock
        self._initial = initial
        self._poll_s = poll_s
        self._grace = close_grace_s
        self._log = log
        self._max_backlog = max_backlog_bytes
        self._out: deque = deque()
        self._backlog = 0
        self._pong: Optional[bytes] = None
        self._close_frame: Optional[bytes] = None
        self._closing_since: Optional[float] = None  # no data frames after this
        self._abort = False  # both threads give up at their next wake-up
        self._cond = threading.Condition()
        self.close_code: Optional[int] = None  # the code this side sent
        self.pongs_received = 0
        self._cpu = CpuBudget(MESSAGE_CPU_SHARE)
        self.closed = threading.Event()
        self._writer = threading.Thread(target=self._write_loop, name="mxscope-ws-writer", daemon=True)
        self._writer.start()

    @property
    def backlog_bytes(self) -> int:
        return self._backlog

    # ------------------------------------------------------------------ sending (any thread)

    def send_text(self, text: str) -> bool:
        return self.send_frame(*text_frame(text))

    def send_frame(self, frame: bytes, size: int) -> bool:
        """Queue a prebuilt frame; False (and the connection closes with 1013) when the client is too far behind."""
        with self._cond:
            if self._closing_since is not None:
                return False
            if self._backlog + size > self._max_backlog:
                self._close_locked(1013, "too far behind: reconnect and subscribe from your last seq", discard_pending=True)
                return False
            self._out.append((frame, size))
            self._backlog += size
            self._cond.notify()
        return True

    def close(self, code: Optional[int] = 1000, reason: str = "", discard_pending: bool = False) -> None:
        """Queue a close frame (after what is queued, unless discard_pending); the reader finishes the connection."""
        with self._cond:
            self._close_locked(code, reason, discard_pending)

    def _close_locked(self, code: Optional[int], reason: str, discard_pending: bool) -> None:
        if self._closing_since is not None:
            return
        self._closing_since = time.monotonic()
        self.close_code = code
        if discard_pending:
            self._out.clear()
            self._backlog = 0
        self._pong = None
        self._close_frame = encode_frame(OP_CLOSE, close_payload(code, reason))
        self._cond.notify()

    # ------------------------------------------------------------------ writer thread

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not (self._abort or self._pong is not None or self._out or self._close_frame is not None):
                        self._cond.wait()
                    if self._abort:
                        return
                    last = False
                    if self._pong is not None:
                        frame, self._pong = self._pong, None
                    elif self._out:
                        frame, size = self._out.popleft()
                        self._backlog -= size
                    else:
                        frame, self._close_frame, last = self._close_frame, None, True
                self._send_all(frame)
                if last:
                    self._sock.shutdown(socket.SHUT_WR)  # the client sees our close, then the end of our stream
                    return
        except OSError:
            with self._cond:
                self._abort = True  # the reader gives up at its next wake-up

    def _send_all(self, frame: bytes) -> None:
        view = memoryview(frame)
        sent = 0
        while sent < len(view):
            try:
                sent += self._sock.send(view[sent:sent + _SEND_CHUNK])
            except socket.timeout:
                if self._should_stop():
                    raise OSError("gave up on a client that does not read") from None

    def _should_stop(self) -> bool:
        with self._cond:
            return self._abort or (self._closing_since is not None and time.monotonic() - self._closing_since > self._grace)

    # ------------------------------------------------------------------ reader (the caller's thread)

    def read_messages(self, on_text: Callable[[Optional[str], int], None], max_message_bytes: int, hard_limit_bytes: int) -> None:
        """Calls on_text(text, size) per message; text is None for a message over max_message_bytes
        (read, checked and dropped) or a binary one (size -1). Returns when the connection is finished."""
        reader = MessageReader(SocketBytes(self._sock, self._initial, self._should_stop), max_message_bytes, hard_limit_bytes)
        self._initial = b""
        peer_gone = False
        try:
            while True:
                started = time.thread_time()
                kind, value, size = reader.next_event()
                if kind == "close":
                    self.close(value, "", discard_pending=True)  # echo the client's code (none for none)
                    break
                if kind == "ping":
                    with self._cond:
                        if self._closing_since is None:
                            self._pong = encode_frame(OP_PONG, value)
                            self._cond.notify()
                elif kind == "pong":
                    self.pongs_received += 1
                elif self._closing_since is None:
                    on_text(value if kind == "text" else None, -1 if kind == "binary" else size)
                self._cpu.charge(time.thread_time() - started)
        except ProtocolViolation as violation:
            self._log(f"closing a client with {violation.code}: {violation.reason}")
            self.close(violation.code, violation.reason, discard_pending=True)
        except (EOFError, OSError):
            peer_gone = True
        except Exception as error:  # RecursionError, MemoryError, a handler's bug: this client only
            self._log(f"closing a client after an internal error: {error!r}")
            self.close(1011, "internal error", discard_pending=True)
        finally:
            self._finish(drain=not peer_gone)

    def _finish(self, drain: bool) -> None:
        with self._cond:
            if self._closing_since is None:
                self._abort = True  # the client vanished: nothing more to send
                self._closing_since = time.monotonic()
            self._cond.notify()
        self._writer.join(self._grace + self._poll_s)
        with self._cond:
            self._abort = True
            self._cond.notify()
        self._writer.join(self._poll_s + 1)
        if drain:
            self._drain_until_eof(time.monotonic() + self._grace)
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self.closed.set()

    def _drain_until_eof(self, deadline: float) -> None:
        """Read and drop what the client still sends until it closes (a close with unread input
        would reset the connection and could destroy our close frame before the client reads it),
        for at most the close grace and _MAX_DRAIN_BYTES: a client still streaming gets the reset."""
        drained = 0
        while time.monotonic() < deadline and drained < _MAX_DRAIN_BYTES:
            try:
                chunk = self._sock.recv(1 << 16)
                if not chunk:
                    return
                drained += len(chunk)
            except socket.timeout:
                continue
            except OSError:
                return

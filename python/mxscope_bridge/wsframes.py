"""RFC 6455 framing for a server: encodes server frames and reads client frames, refusing every
frame the RFC forbids before it costs memory (a control frame's length is checked before its
payload is read; a message's size before its bytes are kept).

What a violation closes with (the same as the `ws` package the TypeScript server uses):
1002 protocol error (RSV bits without an extension, reserved opcodes, unmasked or fragmented or
over-125-byte control frames, a continuation with no message, a new message inside a fragmented
one, non-minimal lengths, invalid close codes), 1007 invalid UTF-8 (text messages, close reasons),
1009 a message over the hard size limit.
"""
from __future__ import annotations

import codecs
import socket
import struct
from typing import Callable, Optional, Tuple

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
KNOWN_OPCODES = (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG)
MAX_CONTROL_PAYLOAD = 125
_CHUNK = 1 << 20  # bytes read (and unmasked) at a time; a multiple of 4 keeps the mask aligned


class ProtocolViolation(Exception):
    """The client broke RFC 6455; the connection closes with `code`."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code
        self.reason = reason


def is_valid_close_code(code: int) -> bool:
    """Codes a close frame may carry on the wire (RFC 6455 7.4; 1012-1014 registered since)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def encode_frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        header = struct.pack(">BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        header = struct.pack(">BBH", 0x80 | opcode, 126, n)
    else:
        header = struct.pack(">BBQ", 0x80 | opcode, 127, n)
    return header + payload


def close_payload(code: Optional[int], reason: str = "") -> bytes:
    """A close frame's payload; the reason is cut to fit the 125-byte control frame limit."""
    if code is None:
        return b""
    return struct.pack(">H", code) + reason.encode("utf-8")[:MAX_CONTROL_PAYLOAD - 2].decode("utf-8", "ignore").encode("utf-8")


def unmask(data: bytes, mask: bytes) -> bytes:
    n = len(data)
    if not n:
        return b""
    return (int.from_bytes(data, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")


class SocketBytes:
    """Exact reads from a socket that has a timeout: a timeout only asks `should_stop` whether to go
    on, so an idle client is fine and a closing connection is not waited on for ever."""

    def __init__(self, sock: socket.socket, initial: bytes = b"", should_stop: Callable[[], bool] = lambda: False):
        self._sock = sock
        self._buffer = initial
        self._should_stop = should_stop

    def exact(self, n: int) -> bytes:
        if len(self._buffer) >= n:
            data, self._buffer = self._buffer[:n], self._buffer[n:]
            return data
        chunks = [self._buffer]
        have = len(self._buffer)
        self._buffer = b""
        while have < n:
            try:
                chunk = self._sock.recv(min(n - have, _CHUNK))
            except socket.timeout:
                if self._should_stop():
                    raise EOFError("connection closing") from None
                continue
            if not chunk:
                raise EOFError("connection closed by the client")
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)


Event = Tuple[str, object, int]
"""(kind, value, size): ("text", str, bytes) · ("binary", None, bytes) · ("too-large", None, bytes)
· ("ping", payload, n) · ("pong", payload, n) · ("close", code or None, 0)."""


class MessageReader:
    """Assembles client messages from frames. Text over `max_message_bytes` is read, checked and
    dropped ("too-large"); a message over `hard_limit_bytes` is a violation (1009)."""

    def __init__(self, source: SocketBytes, max_message_bytes: int, hard_limit_bytes: int):
        self._source = source
        self._max = max_message_bytes
        self._hard = hard_limit_bytes
        self._kind: Optional[int] = None  # opcode of the message being assembled, None between messages
        self._size = 0
        self._pieces: list = []
        self._decoder = None

    def next_event(self) -> Event:
        while True:
            fin, opcode, length, mask = self._header()
            if opcode >= OP_CLOSE:
                return self._control(opcode, unmask(self._source.exact(length), mask))
            event = self._data(fin, opcode, length, mask)
            if event is not None:
                return event

    def _header(self):
        b0, b1 = self._source.exact(2)
        fin, rsv, opcode = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F
        if rsv:
            raise ProtocolViolation(1002, "RSV bits set, but no extension was negotiated")
        if opcode not in KNOWN_OPCODES:
            raise ProtocolViolation(1002, f"reserved opcode 0x{opcode:x}")
        if not b1 & 0x80:
            raise ProtocolViolation(1002, "client frames must be masked")
        length = b1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", self._source.exact(2))[0]
            if length < 126:
                raise ProtocolViolation(1002, "frame length not in its minimal encoding")
        elif length == 127:
            length = struct.unpack(">Q", self._source.exact(8))[0]
            if length >> 63:
                raise ProtocolViolation(1002, "frame length with the most significant bit set")
            if length < 1 << 16:
                raise ProtocolViolation(1002, "frame length not in its minimal encoding")
        if opcode >= OP_CLOSE:
            if not fin:
                raise ProtocolViolation(1002, "fragmented control frame")
            if length > MAX_CONTROL_PAYLOAD:
                raise ProtocolViolation(1002, f"control frame of {length} bytes (at most {MAX_CONTROL_PAYLOAD})")
        return fin, opcode, length, self._source.exact(4)

    def _control(self, opcode: int, payload: bytes) -> Event:
        if opcode != OP_CLOSE:
            return ("ping" if opcode == OP_PING else "pong", payload, len(payload))
        if not payload:
            return ("close", None, 0)
        if len(payload) == 1:
            raise ProtocolViolation(1002, "close frame with a 1-byte payload")
        code = struct.unpack(">H", payload[:2])[0]
        if not is_valid_close_code(code):
            raise ProtocolViolation(1002, f"invalid close code {code}")
        try:
            payload[2:].decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolViolation(1007, "close reason is not valid UTF-8") from None
        return ("close", code, 0)

    def _data(self, fin: bool, opcode: int, length: int, mask: bytes) -> Optional[Event]:
        if opcode == OP_CONT:
            if self._kind is None:
                raise ProtocolViolation(1002, "continuation frame with no message to continue")
        else:
            if self._kind is not None:
                raise ProtocolViolation(1002, "new message before the fragmented one was finished")
            self._kind, self._size, self._pieces = opcode, 0, []
            self._decoder = codecs.getincrementaldecoder("utf-8")() if opcode == OP_TEXT else None
        self._size += length
        if self._size > self._hard:
            raise ProtocolViolation(1009, f"message over {self._hard} bytes")
        keep = self._kind == OP_TEXT and self._size <= self._max
        if not keep:
            self._pieces = []  # a message past the limit is only checked from here on, never kept
        remaining = length
        while remaining:
            chunk = unmask(self._source.exact(min(remaining, _CHUNK)), mask)
            remaining -= len(chunk)
            self._feed(chunk, keep)
        if not fin:
            return None
        self._feed(b"", keep, final=True)
        kind, size, text = self._kind, self._size, "".join(self._pieces)
        self._kind, self._pieces, self._decoder = None, [], None
        if kind == OP_BINARY:
            return ("binary", None, size)
        if size > self._max:
            return ("too-large", None, size)
        return ("text", text, size)

    def _feed(self, chunk: bytes, keep: bool, final: bool = False) -> None:
        if self._decoder is None:
            return
        try:
            piece = self._decoder.decode(chunk, final)
        except UnicodeDecodeError:
            raise ProtocolViolation(1007, "text message is not valid UTF-8") from None
        if keep and piece:
            self._pieces.append(piece)

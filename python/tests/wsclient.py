"""A minimal blocking websocket client for the tests (text frames only)."""
import base64
import json
import os
import socket
import struct


class HandshakeRefused(Exception):
    def __init__(self, status_line: str):
        super().__init__(status_line)
        self.status_line = status_line


class Client:
    def __init__(self, url: str, headers: dict = None, timeout: float = 10.0):
        assert url.startswith("ws://")
        hostport, _, path = url[len("ws://"):].partition("/")
        host, _, port = hostport.rpartition(":")
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n".encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            response += chunk
        status = response.split(b"\r\n", 1)[0].decode()
        if " 101 " not in status:
            self.sock.close()
            raise HandshakeRefused(status)
        self._buffer = response.split(b"\r\n\r\n", 1)[1]

    def _exact(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("connection closed")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def send_raw(self, payload: bytes, opcode: int = 0x1, fin: bool = True, rsv: int = 0, masked: bool = True) -> None:
        self.sock.sendall(frame(payload, opcode, fin, rsv, masked))

    def send(self, message: dict) -> None:
        self.send_raw(json.dumps(message).encode())

    def recv_frame(self):
        b0, b1 = self._exact(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._exact(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._exact(8))[0]
        return b0 & 0x0F, self._exact(n)

    def recv_close(self, skip_text: bool = True):
        """The close code the server sent (None for an empty close); EOFError if it just hung up."""
        while True:
            opcode, payload = self.recv_frame()
            if opcode == 0x8:
                return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            if not skip_text and opcode != 0xA:
                raise AssertionError(f"expected a close frame, got opcode {opcode}")

    def recv(self) -> dict:
        """The next text message as JSON (raises EOFError on close)."""
        while True:
            opcode, payload = self.recv_frame()
            if opcode == 0x1:
                return json.loads(payload)
            if opcode == 0x8:
                raise EOFError(f"closed with {struct.unpack('>H', payload[:2])[0] if len(payload) >= 2 else 1005}")

    def recv_until(self, predicate, limit: int = 10000) -> list:
        seen = []
        for _ in range(limit):
            seen.append(self.recv())
            if predicate(seen[-1]):
                return seen
        raise AssertionError(f"no matching message in {limit}")

    def close(self) -> None:
        self.sock.close()


def frame(payload: bytes, opcode: int = 0x1, fin: bool = True, rsv: int = 0, masked: bool = True) -> bytes:
    """One client frame, with any header bits a test needs (rsv: the 3 RSV bits as 0..7)."""
    n = len(payload)
    header = struct.pack(">B", (0x80 if fin else 0) | (rsv << 4) | opcode)
    mask_bit = 0x80 if masked else 0
    if n < 126:
        header += struct.pack(">B", mask_bit | n)
    elif n < 1 << 16:
        header += struct.pack(">BH", mask_bit | 126, n)
    else:
        header += struct.pack(">BQ", mask_bit | 127, n)
    if not masked:
        return header + payload
    mask = os.urandom(4)
    return header + mask + (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")

"""Seeded fuzzing of the bridge's server: random frames (any opcode, RSV bits, mask, length form,
truncation) and mutated protocol messages. The server answers or closes with a documented code,
never hangs, never loses a thread or socket, and keeps serving real clients."""
import json
import random
import socket
import struct
import threading
import time
import unittest

from mxscope_bridge.config import run_config
from mxscope_bridge.link import TrainerServer
from mxscope_bridge.messages import read_frame

from tests.test_server_bounds import server_side_sockets, until
from tests.wsclient import Client

CONNECTIONS = 400
MESSAGES = 3000
CLOSE_CODES = {None, 1000, 1001, 1002, 1003, 1007, 1009, 1011, 1012, 1013, 1014} | set(range(3000, 5000))
SEEDS = [b'{"type":"subscribe","id":"s","from":0}', b'{"type":"startRun","id":"r"}', b'{"type":"hello","id":"h","protocol":{"major":1,"minor":0},"client":{"name":"f","version":"1"}}',
         b'{"type":"setNextRunConfig","id":"c","change":{"gemms":{"wgrad":{"rotation":"hadamard"}},"seed":3}}', b"\xce\xba", b"[" * 70, b""]


def random_frame(rng: random.Random) -> bytes:
    payload = rng.choice(SEEDS)
    if rng.random() < 0.5 and payload:
        data = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        payload = bytes(data)
    if rng.random() < 0.1:
        payload = bytes(rng.randrange(256) for _ in range(rng.choice((1, 125, 126, 300))))
    opcode = rng.choice((0x0, 0x1, 0x1, 0x1, 0x2, 0x8, 0x9, 0xA, rng.randrange(16)))
    b0 = (0x80 if rng.random() < 0.85 else 0) | (rng.randrange(8) << 4 if rng.random() < 0.1 else 0) | opcode
    masked = rng.random() < 0.95
    n = len(payload)
    form = rng.random()
    if n < 126 and form < 0.9:
        header = bytes([b0, (0x80 if masked else 0) | n])
    elif form < 0.95:
        header = bytes([b0, (0x80 if masked else 0) | 126]) + struct.pack(">H", n)
    else:
        header = bytes([b0, (0x80 if masked else 0) | 127]) + struct.pack(">Q", n if rng.random() < 0.7 else rng.getrandbits(64))
    mask = bytes(rng.randrange(256) for _ in range(4)) if masked else b""
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if masked else payload
    raw = header + mask + body
    return raw[:rng.randrange(len(raw) + 1)] if rng.random() < 0.05 else raw


def close_code_of(data: bytes):
    """The code of the first close frame the server sent, parsing its unmasked frames; 'none' if none."""
    i = 0
    while i + 2 <= len(data):
        opcode, n = data[i] & 0x0F, data[i + 1] & 0x7F
        i += 2
        if n == 126:
            n, i = struct.unpack(">H", data[i:i + 2])[0], i + 2
        elif n == 127:
            n, i = struct.unpack(">Q", data[i:i + 8])[0], i + 8
        if opcode == 0x8:
            return struct.unpack(">H", data[i:i + 2])[0] if n >= 2 else None
        i += n
    return "none"


class Fuzz(unittest.TestCase):
    def test_random_frames_never_hang_or_leak_and_the_server_keeps_serving(self):
        server = TrainerServer(run_config(), no_token=True, poll_s=0.2)
        self.addCleanup(server.close)
        host, port = server.url[len("ws://"):].rsplit(":", 1)
        baseline = threading.active_count()
        codes = {}
        started = time.monotonic()
        for seed in range(CONNECTIONS):
            rng = random.Random(seed)
            client = Client(server.url, timeout=10)
            try:
                client.sock.sendall(b"".join(random_frame(rng) for _ in range(rng.randint(1, 6))))
                client.sock.shutdown(socket.SHUT_WR)  # then the server must finish: answer, close, hang up
            except OSError:
                pass
            data = client._buffer
            try:
                while True:
                    chunk = client.sock.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            client.close()
            code = close_code_of(data)
            self.assertIn(code, CLOSE_CODES | {"none"}, f"seed {seed}")
            codes[code] = codes.get(code, 0) + 1
        elapsed = time.monotonic() - started
        print(f"\n{CONNECTIONS} fuzzed connections in {elapsed:.1f} s; close codes: {dict(sorted(codes.items(), key=str))}")
        until(lambda: threading.active_count() <= baseline and server._server.client_count == 0, timeout=10, what="every connection freed")
        until(lambda: not server_side_sockets(int(port)), what="every server socket closed")
        client = Client(server.url)
        self.addCleanup(client.close)
        self.assertEqual(client.recv()["type"], "hello")
        client.send({"type": "startRun", "id": "still-serving"})
        self.assertEqual(client.recv()["id"], "still-serving")

    def test_mutated_messages_are_classified_without_raising(self):
        rng = random.Random(11)
        base = [json.loads(seed) for seed in SEEDS[:4]]
        kinds = {}
        for _ in range(MESSAGES):
            text = json.dumps(rng.choice(base))
            chars = list(text)
            for _ in range(rng.randint(1, 5)):
                position = rng.randrange(len(chars))
                chars[position] = rng.choice('{}[]":,0123456789-.eE ntrufalsx\\\u00e9\U0001F600')
            for direction in ("client", "server"):
                frame = read_frame("".join(chars), direction)
                self.assertIn(frame.kind, ("message", "unknown", "invalid"))
                kinds[frame.kind] = kinds.get(frame.kind, 0) + 1
        print(f"\n{MESSAGES} mutated messages x 2 directions: {kinds}")


if __name__ == "__main__":
    unittest.main()

"""RFC 6455 conformance of the bridge's websocket server, over real sockets: every frame the RFC
forbids closes the connection with the code the RFC (and the `ws` package) uses, and the server
then hangs up; legal but unusual frames (fragments, control frames between them) work."""
import socket
import struct
import unittest

from mxscope_bridge.config import run_config
from mxscope_bridge.link import TrainerServer

from tests.wsclient import Client, frame

OP_TEXT, OP_CONT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x0, 0x2, 0x8, 0x9, 0xA

PROTOCOL_ERRORS = {
    "RSV1 without an extension": [frame(b"{}", rsv=4)],
    "RSV2": [frame(b"{}", rsv=2)],
    "RSV3 on a ping": [frame(b"", OP_PING, rsv=1)],
    **{f"reserved opcode 0x{op:x}": [frame(b"{}", op)] for op in (0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF)},
    "ping of 126 bytes": [frame(b"p" * 126, OP_PING)],
    "close of 126 bytes": [frame(struct.pack(">H", 1000) + b"r" * 124, OP_CLOSE)],
    "pong of 1 MiB": [frame(b"p" * (1 << 20), OP_PONG)],
    "fragmented ping": [frame(b"a", OP_PING, fin=False)],
    "continuation with no message": [frame(b"{}", OP_CONT)],
    "new text inside a fragmented one": [frame(b'{"a":', OP_TEXT, fin=False), frame(b"1}", OP_TEXT)],
    "unmasked frame": [frame(b"{}", masked=False)],
    "close with a 1-byte payload": [frame(b"\x03", OP_CLOSE)],
    **{f"close code {code}": [frame(struct.pack(">H", code), OP_CLOSE)]
       for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535)},
    "16-bit length in its non-minimal form": [bytes([0x81, 0x80 | 126, 0, 5]) + b"\0\0\0\0" + b"hello"],
    "64-bit length with the top bit set": [bytes([0x81, 0x80 | 127]) + struct.pack(">Q", 1 << 63)],
}

INVALID_UTF8 = {
    "lone continuation byte": [frame(b'{"a":"\x80"}')],
    "0xff": [frame(b"\xff\xfe")],
    "UTF-16 surrogate encoded": [frame(b'"\xed\xa0\x80"')],
    "overlong slash": [frame(b'"\xc0\xaf"')],
    "invalid across fragments": [frame(b'"\xce', fin=False), frame(b'\xff"', OP_CONT)],
    "truncated at the end": [frame(b'"\xe2\x82')],
    "close reason": [frame(struct.pack(">H", 1000) + b"\xff", OP_CLOSE)],
}


class Rfc6455(unittest.TestCase):
    def setUp(self):
        self.server = TrainerServer(run_config(preset="rfc"), no_token=True, poll_s=0.2)
        self.addCleanup(self.server.close)

    def connect(self):
        client = Client(self.server.url, timeout=5)
        self.addCleanup(client.close)
        self.assertEqual(client.recv()["type"], "hello")
        return client

    def assert_closed_with(self, frames, code):
        client = self.connect()
        try:
            for raw in frames:
                client.sock.sendall(raw)
        except OSError:
            pass  # the server may hang up before it has read everything we send
        self.assertEqual(client.recv_close(), code)
        client.sock.settimeout(5)
        self.assertEqual(client.sock.recv(1 << 16), b"", "the server closes the TCP connection after its close frame")
        client.close()

    def assert_alive(self, client):
        client.send({"type": "startRun", "id": "alive"})
        self.assertEqual(client.recv()["id"], "alive")

    def test_protocol_errors_close_with_1002(self):
        for name, frames in PROTOCOL_ERRORS.items():
            with self.subTest(name):
                self.assert_closed_with(frames, 1002)

    def test_invalid_utf8_closes_with_1007(self):
        for name, frames in INVALID_UTF8.items():
            with self.subTest(name):
                self.assert_closed_with(frames, 1007)

    def test_a_message_over_16_mib_closes_with_1009_before_its_bytes_are_read(self):
        header_only = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", 16 * 1024 * 1024 + 1) + b"\0\0\0\0"
        self.assert_closed_with([header_only], 1009)
        fragments = [frame(b"x" * (8 << 20), fin=False), frame(b"x" * (8 << 20), OP_CONT, fin=False), frame(b"x", OP_CONT)]
        self.assert_closed_with(fragments, 1009)

    def test_valid_close_codes_are_echoed_and_an_empty_close_gets_an_empty_one(self):
        for code in (1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999):
            with self.subTest(code):
                self.assert_closed_with([frame(struct.pack(">H", code) + "bye ✓".encode(), OP_CLOSE)], code)
        self.assert_closed_with([frame(b"", OP_CLOSE)], None)

    def test_ping_gets_its_payload_back_and_fragments_may_carry_control_frames_between_them(self):
        client = self.connect()
        client.send_raw(b"p" * 125, OP_PING)
        self.assertEqual(client.recv_frame(), (OP_PONG, b"p" * 125))
        # "κ" split between two fragments, a ping and a pong between them: one valid message
        client.send_raw(b'{"type":"startRun","id":"\xce', OP_TEXT, fin=False)
        client.send_raw(b"x", OP_PING)
        client.send_raw(b"unsolicited", OP_PONG)
        client.send_raw(b'\xba"}', OP_CONT)
        self.assertEqual(client.recv_frame(), (OP_PONG, b"x"))
        reply = client.recv()
        self.assertEqual((reply["id"], reply["code"]), ("κ", "not-supported"))
        client.send_raw(b"\x00\x01", OP_BINARY)
        self.assertEqual(client.recv()["code"], "invalid-message")
        client.send_raw(b"", OP_TEXT, fin=False)
        client.send_raw(b"", OP_CONT, fin=False)
        client.send_raw(b"{}", OP_CONT)
        self.assertEqual(client.recv()["code"], "invalid-message")
        self.assert_alive(client)

    def test_a_frame_sent_in_the_same_packet_as_the_upgrade_is_read(self):
        host, port = self.server.url[len("ws://"):].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=5)
        self.addCleanup(sock.close)
        request = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        sock.sendall(request + frame(b"p", OP_PING))
        data = b""
        while b"\x8a\x01p" not in data:
            chunk = sock.recv(4096)
            self.assertTrue(chunk, "the server hung up")
            data += chunk
        self.assertIn(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", data)  # RFC 6455's sample accept key


if __name__ == "__main__":
    unittest.main()

"""Who may connect to the bridge: a token by default (generated, printed, constant-time), an explicit
opt-out on loopback only, browsers refused unless their origin is allow-listed."""
import os
import tempfile
import unittest
from unittest import mock

import torch

from mxscope_bridge.config import run_config
from mxscope_bridge.link import PROTOCOL_VERSION, TOKEN_ENV, TrainerServer, is_loopback
from mxscope_bridge.remembered import remembered_token, token_path

from tests.helpers import TinyNet, bridge_for
from tests.wsclient import Client, HandshakeRefused


def refusal(url, headers=None):
    try:
        Client(url, headers=headers).close()
    except HandshakeRefused as refused:
        return refused.status_line
    return "accepted"


class TokenByDefault(unittest.TestCase):
    def test_a_server_without_a_token_argument_generates_one_and_prints_it(self):
        with mock.patch.dict(os.environ, {TOKEN_ENV: ""}):
            server = TrainerServer(run_config())
        self.addCleanup(server.close)
        self.assertGreaterEqual(len(server.token), 24)
        line = server.listening_line()
        self.assertTrue(line.startswith('MXSCOPE_LISTENING {"url":"ws://127.0.0.1:'), line)
        version = "%d.%d" % (PROTOCOL_VERSION["major"], PROTOCOL_VERSION["minor"])
        self.assertIn(f'/?token={server.token}","token":"{server.token}","protocol":"{version}"}}', line)
        self.assertEqual(server.connect_url, f"{server.url}/?token={server.token}")
        self.assertIn("401", refusal(server.url))
        self.assertEqual(refusal(server.connect_url), "accepted")

    def test_the_token_comes_from_the_environment_when_not_given(self):
        with mock.patch.dict(os.environ, {TOKEN_ENV: "from-env"}):
            server = TrainerServer(run_config())
        self.addCleanup(server.close)
        self.assertEqual(server.token, "from-env")

    def test_bearer_scheme_in_any_case_and_the_query_are_accepted_wrong_or_missing_tokens_refused(self):
        server = TrainerServer(run_config(), token="s3cret")
        self.addCleanup(server.close)
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            self.assertEqual(refusal(server.url, {"Authorization": f"{scheme} s3cret"}), "accepted", scheme)
        self.assertEqual(refusal(server.url + "/?token=s3cret"), "accepted")
        for headers, url in (({}, server.url), ({"Authorization": "Bearer s3cre"}, server.url), ({"Authorization": "Basic s3cret"}, server.url),
                             ({"Authorization": "Bearer"}, server.url), ({}, server.url + "/?token=S3CRET"), ({}, server.url + "/?token=")):
            self.assertIn("401", refusal(url, headers), (headers, url))

    def test_refusals_in_a_loop_log_a_few_lines_a_second_not_one_each(self):
        lines = []
        server = TrainerServer(run_config(), token="t", log=lines.append)
        self.addCleanup(server.close)
        for _ in range(100):
            self.assertIn("401", refusal(server.url))
        self.assertIn("missing or wrong token", lines[0])
        self.assertLess(len(lines), 40)
        print(f"\n100 refused upgrades: {len(lines)} log lines")

    def test_a_remembered_token_file_others_can_read_is_not_trusted(self):
        home = tempfile.mkdtemp(prefix="mxscope-home-")
        with mock.patch.dict(os.environ, {"MXSCOPE_HOME": home}):
            first = remembered_token()
            self.assertEqual(os.stat(token_path()).st_mode & 0o777, 0o600)
            self.assertEqual(remembered_token(), first, "kept across restarts")
            os.chmod(token_path(), 0o644)
            lines = []
            self.assertIsNone(remembered_token(lines.append))
            self.assertIn("readable by other users", lines[0])

    def test_opting_out_is_explicit_and_loopback_only(self):
        server = TrainerServer(run_config(), no_token=True)
        self.addCleanup(server.close)
        self.assertIsNone(server.token)
        self.assertNotIn("token", server.listening_line())
        self.assertEqual(refusal(server.url), "accepted")
        with self.assertRaisesRegex(ValueError, "loopback only"):
            TrainerServer(run_config(), host="0.0.0.0", no_token=True)
        with self.assertRaisesRegex(ValueError, "either"):
            TrainerServer(run_config(), token="t", no_token=True)
        with self.assertRaisesRegex(ValueError, "non-empty"):
            TrainerServer(run_config(), token="  ")

    def test_loopback_means_127_0_0_0_slash_8_localhost_and_ipv6_loopback_only(self):
        for host in ("127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"):
            self.assertTrue(is_loopback(host), host)
        for host in ("127.evil.example", "0.0.0.0", "10.0.0.1", "::", "1270.0.0.1", "127.0.0.1.nip.io"):
            self.assertFalse(is_loopback(host), host)

    def test_the_bridge_serves_with_a_token_by_default(self):
        bridge = bridge_for(TinyNet(), None)
        self.addCleanup(bridge.close)
        self.assertTrue(bridge.server.token)
        self.assertIn("401", refusal(bridge.server.url))

    def test_the_bridge_passes_the_opt_out_and_the_origin_list_to_its_server(self):
        bridge = bridge_for(TinyNet(), None, no_token=True, allowed_origins=["http://localhost:8888"])
        self.addCleanup(bridge.close)
        self.assertIsNone(bridge.server.token)
        self.assertEqual(refusal(bridge.server.url, {"Origin": "http://localhost:8888"}), "accepted")
        self.assertIn("403", refusal(bridge.server.url, {"Origin": "http://evil.example"}))


class Origins(unittest.TestCase):
    def test_upgrades_from_browsers_are_refused_with_403_even_with_the_token(self):
        server = TrainerServer(run_config(), token="t")
        self.addCleanup(server.close)
        for origin in ("null", "file://", "http://localhost:8080", "vscode-webview://abc"):
            self.assertIn("403", refusal(server.connect_url, {"Origin": origin}), origin)
        self.assertEqual(refusal(server.connect_url), "accepted")

    def test_an_allow_listed_origin_may_connect_and_still_needs_the_token(self):
        server = TrainerServer(run_config(), token="t", allowed_origins=["http://localhost:8888/"])
        self.addCleanup(server.close)
        self.assertEqual(refusal(server.connect_url, {"Origin": "http://LOCALHOST:8888"}), "accepted")
        self.assertIn("401", refusal(server.url, {"Origin": "http://localhost:8888"}))
        self.assertIn("403", refusal(server.connect_url, {"Origin": "http://localhost:8889"}))


class Handshake(unittest.TestCase):
    def test_malformed_upgrades_get_plain_http_refusals(self):
        import socket
        server = TrainerServer(run_config(), no_token=True)
        self.addCleanup(server.close)
        host, port = server.url[len("ws://"):].rsplit(":", 1)
        cases = {
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n": b"426",
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n": b"426",
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n": b"400",
            b"POST / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n": b"400",
            b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n": b"400",
            b"\x16\x03\x01 TLS hello\r\n\r\n": b"400",
        }
        for request, status in cases.items():
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(request)
                self.assertIn(status, sock.recv(4096).split(b"\r\n")[0], request[:60])


class FromCheckpoint(unittest.TestCase):
    def test_start_run_from_a_checkpoint_is_refused_without_touching_or_echoing_the_file(self):
        bridge = bridge_for(TinyNet(), None, token="t")
        self.addCleanup(bridge.close)
        client = Client(bridge.server.connect_url)
        self.addCleanup(client.close)
        client.recv()
        for path in ("/etc/passwd", "/etc/shadow", "../../x.safetensors"):
            client.send({"type": "startRun", "id": "r", "fromCheckpoint": path})
            error = client.recv()
            self.assertEqual(error["code"], "not-supported")
            self.assertNotIn("root", error["message"])
            self.assertNotIn(path, error["message"])


if __name__ == "__main__":
    torch.manual_seed(0)
    unittest.main()

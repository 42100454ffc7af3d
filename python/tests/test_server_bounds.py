"""What a hostile client can cost the training process: memory, threads, sockets and time stay
bounded, and whatever goes wrong on one connection closes that connection only, freeing its
threads and socket (issue 11: 600 unread 1 MiB pings used to add 603 MiB; 500 idle sockets held
500 threads; a deep frame killed the reader thread and left its socket in CLOSE-WAIT)."""
import gc
import os
import socket
import threading
import time
import unittest
from unittest import mock

from mxscope_bridge.config import run_config
from mxscope_bridge.link import TrainerServer
from mxscope_bridge.wsserver import WebSocketServer

from tests.wsclient import Client, HandshakeRefused, frame

OP_PING = 0x9


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


HELD_STATES = {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}


def server_side_sockets(port: int) -> list:
    """States of the connections whose local port is the server's (from /proc/net/tcp*) and that
    the server has not closed yet (closed ones linger in FIN_WAIT or TIME_WAIT, held by the kernel)."""
    states = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in HELD_STATES:
                    states.append(HELD_STATES[fields[3]])
    return states


def until(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


def host_port(url):
    host, port = url[len("ws://"):].rsplit(":", 1)
    return host, int(port)


def serve_and_connect(test: unittest.TestCase, **server_options):
    """A no-token server on loopback (quick to give up on closing sockets) and a client past its hello."""
    server = TrainerServer(run_config(), no_token=True, poll_s=0.2, **server_options)
    test.addCleanup(server.close)
    client = Client(server.url, timeout=10)
    test.addCleanup(client.close)
    client.recv()
    return server, client


class Memory(unittest.TestCase):
    def test_the_issues_600_unread_1_mib_pings_add_next_to_nothing(self):
        _, client = serve_and_connect(self)
        ping = frame(b"p" * (1 << 20), OP_PING)
        gc.collect()
        before = rss_bytes()
        sent = 0
        try:
            for _ in range(600):
                client.sock.sendall(ping)
                sent += 1
        except OSError:
            pass  # the server hung up on the first one
        self.assertEqual(client.recv_close(), 1002)
        grown = rss_bytes() - before
        print(f"\n600 x 1 MiB pings: {sent} sent before the server hung up; RSS +{grown / 2**20:.1f} MiB (was +603 MiB)")
        self.assertLess(grown, 16 << 20)

    @mock.patch("mxscope_bridge.wsconnection.MESSAGE_CPU_SHARE", 1.0)  # unpaced: this test is about memory, not CPU
    def test_a_flood_of_legal_pings_never_read_keeps_one_pong_pending(self):
        server, client = serve_and_connect(self)
        ping = frame(b"p" * 125, OP_PING)
        gc.collect()
        before = rss_bytes()
        client.sock.sendall(ping * 20000)  # 2.6 MB of pings; the client reads nothing
        client.send({"type": "stopRun", "id": "last"})
        until(lambda: server._peers and server._peers[0].conn._pong is None and not server._peers[0].conn._out
              or rss_bytes() - before > 32 << 20, timeout=20, what="the server read every ping")
        grown = rss_bytes() - before
        pongs, reply = 0, None
        while reply is None:
            opcode, payload = client.recv_frame()
            pongs += opcode == 0xA
            reply = payload if opcode == 0x1 else None
        print(f"\n20,000 unread 125-byte pings: {pongs} pongs reached the client; RSS +{grown / 2**20:.1f} MiB")
        self.assertIn(b'"last"', reply)
        self.assertLess(pongs, 20000, "pongs for pings the client did not wait for are coalesced")
        self.assertLess(grown, 8 << 20)


class Threads(unittest.TestCase):
    def test_500_idle_sockets_hold_no_threads_and_are_dropped_after_the_handshake_timeout(self):
        server = TrainerServer(run_config(), handshake_timeout_s=1.0, max_pending=64)
        self.addCleanup(server.close)
        threads_before = threading.active_count()
        idle = []
        self.addCleanup(lambda: [s.close() for s in idle])
        for _ in range(500):
            idle.append(socket.create_connection(host_port(server.url), timeout=5))
        time.sleep(0.3)
        self.assertLessEqual(threading.active_count(), threads_before, "idle sockets cost no thread")
        self.assertLessEqual(server._server.pending_count, 64)
        refused = dropped = 0
        for sock in idle:
            sock.settimeout(5)
            answer = sock.recv(4096)  # 503 at once when max_pending wait already, else EOF after the 1 s timeout
            refused += answer.startswith(b"HTTP/1.1 503")
            dropped += answer == b""
        print(f"\n500 idle sockets: {refused} refused with 503 at once, {dropped} dropped after the 1 s handshake timeout; "
              f"threads {threads_before} -> {threading.active_count()}")
        self.assertEqual(refused + dropped, 500)
        self.assertGreater(refused, 0)
        until(lambda: server._server.pending_count == 0, what="every pending handshake dropped")
        client = Client(server.connect_url)
        self.addCleanup(client.close)
        self.assertEqual(client.recv()["type"], "hello", "a real client still gets in")

    def test_clients_over_the_limit_are_refused_with_503_until_one_leaves(self):
        server = TrainerServer(run_config(), no_token=True, max_clients=3, poll_s=0.2)
        self.addCleanup(server.close)
        threads_before = threading.active_count()
        clients = [Client(server.url) for _ in range(3)]
        self.addCleanup(lambda: [c.close() for c in clients])
        self.assertLessEqual(threading.active_count() - threads_before, 2 * 3, "a reader and a writer per client")
        with self.assertRaises(HandshakeRefused) as refused:
            Client(server.url)
        self.assertIn("503", refused.exception.status_line)
        clients.pop().close()
        until(lambda: server._server.client_count == 2, what="the closed client released")
        clients.append(Client(server.url))
        self.assertEqual(clients[-1].recv()["type"], "hello")


class ReaderErrors(unittest.TestCase):
    """Any exception while a message is handled closes that connection with 1011 and frees it."""

    def test_recursion_memory_and_unicode_errors_close_the_connection_and_free_its_thread_and_socket(self):
        errors = iter([RecursionError("deep"), MemoryError(), UnicodeError("bad"), KeyError("bug")])

        def on_connection(conn, request):
            def on_text(text, size):
                raise next(errors)
            conn.read_messages(on_text, 1 << 20, 4 << 20)

        server = WebSocketServer("127.0.0.1", 0, lambda request: None, on_connection, 1 << 20, poll_s=0.2)
        self.addCleanup(server.close)
        url = f"ws://127.0.0.1:{server.port}"
        baseline_threads = threading.active_count()
        for name in ("RecursionError", "MemoryError", "UnicodeError", "KeyError"):
            with self.subTest(name):
                client = Client(url, timeout=5)
                client.send({"type": "anything"})
                self.assertEqual(client.recv_close(), 1011)
                self.assertEqual(client.sock.recv(10), b"")
                client.close()
        until(lambda: threading.active_count() <= baseline_threads and server.client_count == 0, what="threads freed")
        until(lambda: not server_side_sockets(server.port), what="sockets closed")
        self.assertFalse(any(state == "CLOSE_WAIT" for state in server_side_sockets(server.port)))

    def test_a_client_that_never_reads_is_closed_with_1013_and_freed(self):
        server, client = serve_and_connect(self, max_client_backlog_bytes=1 << 20)
        baseline = threading.active_count() - 2  # less this client's reader and writer
        client.send({"type": "subscribe", "id": "s"})
        until(lambda: server._peers and server._peers[0].subscribed, what="subscribed")
        big = {"type": "step", "runId": "r", "step": 0, "tokens": 0, "loss": 1.0, "lr": 0.1, "gradNorm": 1.0, "stepMs": 1.0, "pad": "x" * 60000}
        for _ in range(400):  # 24 MB against a 1 MiB backlog and a client that reads nothing
            server.publish(big)
        server.flush()
        until(lambda: threading.active_count() <= baseline and not server._peers, timeout=10, what="the stuck client freed")
        until(lambda: not server_side_sockets(server._server.port), what="the stuck client's socket closed")


def thread_cpu_s(name: str) -> float:
    """CPU seconds used so far by this process's threads called `name` (from /proc, 100 Hz ticks)."""
    total = 0
    for thread in threading.enumerate():
        if thread.name == name and thread.native_id:
            with open(f"/proc/self/task/{thread.native_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


class Cpu(unittest.TestCase):
    def test_a_flood_of_cheap_requests_gets_about_a_tenth_of_a_core(self):
        server, client = serve_and_connect(self)
        request = frame(b'{"type":"startRun","id":"flood"}')
        threading.Thread(target=self.drain, args=(client.sock,), daemon=True).start()
        started, cpu_before = time.monotonic(), thread_cpu_s("mxscope-ws-reader")
        batch = memoryview(request * 100)
        sent = offset = 0
        client.sock.settimeout(0.05)
        while time.monotonic() - started < 3.0 or offset:  # whole frames only: end on a frame boundary
            try:
                offset += client.sock.send(batch[offset:])
            except socket.timeout:
                continue  # the server is pacing this client: its buffers are full
            if offset == len(batch):
                sent, offset = sent + 100, 0
        wall, cpu = time.monotonic() - started, thread_cpu_s("mxscope-ws-reader") - cpu_before
        print(f"\nflood of cheap requests for {wall:.1f} s: {sent} sent, the reader used {cpu:.2f} s CPU ({cpu / wall:.0%} of a core)")
        self.assertLess(cpu / wall, 0.25)
        self.assertTrue(server._peers, "the flooding client is paced, not disconnected")

    def test_a_flood_of_refused_upgrades_gets_about_a_tenth_of_a_core(self):
        server = TrainerServer(run_config(), token="t")
        self.addCleanup(server.close)
        request = (b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        started, cpu_before = time.monotonic(), thread_cpu_s("mxscope-ws-accept")
        refused = 0
        while time.monotonic() - started < 2.0:
            with socket.create_connection(host_port(server.url), timeout=5) as sock:
                sock.sendall(request)
                refused += sock.recv(64).startswith(b"HTTP/1.1 401")
        wall, cpu = time.monotonic() - started, thread_cpu_s("mxscope-ws-accept") - cpu_before
        print(f"\nconnection flood for {wall:.1f} s: {refused} upgrades refused, the accept thread used {cpu:.2f} s CPU ({cpu / wall:.0%} of a core)")
        self.assertGreater(refused, 10)
        self.assertLess(cpu / wall, 0.25)

    @staticmethod
    def drain(sock):
        while True:
            try:
                if not sock.recv(1 << 20):
                    return
            except socket.timeout:
                continue
            except OSError:
                return


class DeepJson(unittest.TestCase):
    def test_deep_frames_are_refused_before_parsing_and_the_connection_lives(self):
        server, client = serve_and_connect(self)
        for payload in (b"[" * 65000, b'{"a":' * 10000 + b"1" + b"}" * 10000, b"[" * 65 + b"]" * 65):
            started = time.perf_counter()
            client.send_raw(payload)
            error = client.recv()
            self.assertEqual(error["code"], "bad-json")
            self.assertIn("nested deeper than 64", error["message"])
            self.assertLess(time.perf_counter() - started, 5.0)
        client.send_raw(b'{"type":"startRun","id":"' + b"[" * 64 + b'"}')  # brackets in strings do not count
        self.assertEqual(client.recv()["code"], "not-supported")

    def test_client_frames_over_64_kib_are_dropped_unparsed(self):
        server, client = serve_and_connect(self)
        client.send_raw(b"[" + b"1," * (2 << 20) + b"1]")  # 4 MiB of numbers: seconds of json.loads, holding the GIL
        error = client.recv()
        self.assertEqual(error["code"], "frame-too-large")
        self.assertIn("65536-byte limit", error["message"])
        client.send({"type": "startRun", "id": "after"})
        self.assertEqual(client.recv()["id"], "after")


if __name__ == "__main__":
    unittest.main()

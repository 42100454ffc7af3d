"""Protocol v1 over a real socket: hello, subscribe/replay, requests, token refusal, overflow."""
import threading
import unittest

from mxscope_bridge.config import run_config
from mxscope_bridge.link import TrainerServer

from tests.wsclient import Client, HandshakeRefused


def step_record(i):
    return {"type": "step", "runId": "r", "step": i, "tokens": i, "loss": 1.0, "lr": 0.1, "gradNorm": 1.0, "stepMs": 1.0}


def stats_record(i):
    return {"type": "layerStats", "runId": "r", "step": i, "layer": "l", "gemm": "fprop", "precision": "fp32", "operands": []}


class Protocol(unittest.TestCase):
    def setUp(self):
        self.server = TrainerServer(run_config(preset="test"))
        self.addCleanup(self.server.close)

    def connect(self, **kwargs):
        client = Client(self.server.connect_url, **kwargs)
        self.addCleanup(client.close)
        return client

    def test_hello_then_replay_ack_and_next_run_config_on_subscribe(self):
        for i in range(3):
            self.server.publish(step_record(i))
        self.server.flush()
        client = self.connect()
        hello = client.recv()
        self.assertEqual(hello["type"], "hello")
        self.assertEqual(hello["protocol"], {"major": 1, "minor": 8})
        self.assertEqual(hello["lastSeq"], 3)
        self.assertEqual(hello["sessionId"], self.server.session_id)
        self.assertIn("nextRunConfig", hello["capabilities"])
        client.send({"type": "subscribe", "id": "s1", "from": 2})
        replayed = [client.recv(), client.recv()]
        self.assertEqual([m["seq"] for m in replayed], [2, 3])
        self.assertEqual([m["step"] for m in replayed], [1, 2])
        ack = client.recv()
        self.assertEqual((ack["type"], ack["id"], ack["seq"]), ("ack", "s1", 3))
        config = client.recv()
        self.assertEqual(config["type"], "nextRunConfig")
        self.assertEqual(config["config"]["preset"], "test")
        self.server.publish(step_record(3))
        live = client.recv()
        self.assertEqual((live["seq"], live["step"]), (4, 3))

    def test_set_next_run_config_merges_validates_and_broadcasts(self):
        client = self.connect()
        client.recv()
        client.send({"type": "subscribe", "id": "s"})
        client.recv_until(lambda m: m["type"] == "nextRunConfig")
        client.send({"type": "setNextRunConfig", "id": "c1", "change": {"gemms": {"wgrad": {"precision": "mxfp4", "rotation": "hadamard"}}, "statsEvery": 5}})
        seen = client.recv_until(lambda m: m["type"] == "ack")
        broadcast = [m for m in seen if m["type"] == "nextRunConfig"][-1]
        self.assertEqual(broadcast["config"]["gemms"]["wgrad"]["rotation"], "hadamard")
        self.assertEqual(broadcast["config"]["gemms"]["fprop"]["precision"], "fp32")
        self.assertEqual(self.server.next_run_config["statsEvery"], 5)
        client.send({"type": "setNextRunConfig", "id": "c2", "change": {"gemms": {"wgrad": {"rotation": "sideways"}}}})
        error = client.recv()
        self.assertEqual((error["type"], error["id"], error["code"]), ("error", "c2", "invalid-message"))
        self.assertIn("change.gemms.wgrad.rotation", error["message"])
        client.send({"type": "setNextRunConfig", "id": "c3", "change": {"learningRate": 1}})
        self.assertIn("no such field", client.recv()["message"])

    def test_unreadable_frames_get_errors_and_the_connection_lives(self):
        client = self.connect()
        client.recv()
        client.send_raw(b"{not json")
        self.assertEqual(client.recv()["code"], "bad-json")
        client.send_raw(b"x" * (4 * 1024 * 1024 + 1))
        self.assertEqual(client.recv()["code"], "frame-too-large")
        client.send({"type": "hello", "id": "h", "protocol": {"major": 2, "minor": 0}, "client": {"name": "t", "version": "1"}})
        self.assertEqual(client.recv()["code"], "incompatible-version")

    def test_requests_without_a_handler_are_not_supported(self):
        client = self.connect()
        client.recv()
        client.send({"type": "startRun", "id": "r1"})
        error = client.recv()
        self.assertEqual((error["id"], error["code"]), ("r1", "not-supported"))


class Replay(unittest.TestCase):
    def test_a_replay_larger_than_a_client_may_queue_is_cut_from_the_front_and_said_so_not_closed(self):
        server = TrainerServer(run_config(), no_token=True, max_client_backlog_bytes=1 << 20)
        self.addCleanup(server.close)
        padded = lambda i: {**step_record(i), "pad": "x" * 10000}  # noqa: E731
        for i in range(300):  # 3 MB held for replay, against 0.5 MiB that one subscribe may queue
            server.publish(padded(i))
        server.flush()
        client = Client(server.url)
        self.addCleanup(client.close)
        client.recv()
        client.send({"type": "subscribe", "id": "s", "from": 1})
        seen = client.recv_until(lambda m: m["type"] == "ack")
        seqs = [m["seq"] for m in seen[:-1]]
        self.assertEqual(seqs, list(range(seqs[0], 301)), "the newest frames, in order, without a gap")
        self.assertGreater(seqs[0], 200)
        self.assertEqual(seen[-1]["detail"], f"replayed from seq {seqs[0]}: seqs 1..{seqs[0] - 1} are over the 0.5 MiB one connection may queue at once")
        server.publish(step_record(300))
        self.assertEqual(client.recv_until(lambda m: m.get("seq") == 301 and m["type"] == "step")[-1]["step"], 300)


class Token(unittest.TestCase):
    def test_refuses_without_or_with_a_wrong_token_and_accepts_both_forms(self):
        server = TrainerServer(run_config(), token="s3cret")
        self.addCleanup(server.close)
        for headers, url in (({}, server.url), ({}, server.url + "/?token=nope"), ({"Authorization": "Bearer nope"}, server.url)):
            with self.assertRaises(HandshakeRefused) as refused:
                Client(url, headers=headers)
            self.assertIn("401", refused.exception.status_line)
        for headers, url in (({}, server.url + "/?token=s3cret"), ({"Authorization": "Bearer s3cret"}, server.url)):
            client = Client(url, headers=headers)
            self.assertEqual(client.recv()["type"], "hello")
            client.close()
        self.assertIn('"token":"s3cret"', server.listening_line())



class Overflow(unittest.TestCase):
    def test_stats_are_dropped_and_counted_while_steps_are_kept(self):
        gate = threading.Event()
        written = []

        def slow_sink(record, line):
            gate.wait(10)
            written.append(record)

        server = TrainerServer(run_config(), max_queued_stats=5, on_record_written=slow_sink)
        self.addCleanup(server.close)
        accepted = [server.publish(stats_record(i)) for i in range(50)]
        for i in range(10):
            self.assertTrue(server.publish(step_record(i)))
        self.assertGreater(server.dropped_stats, 0)
        self.assertEqual(server.dropped_stats, accepted.count(False))
        self.assertLessEqual(accepted.count(True), 6)  # the queue bound, plus one the pump already took
        gate.set()
        self.assertTrue(server.flush(10))
        self.assertEqual(sum(r["type"] == "step" for r in written), 10)
        self.assertEqual(server.last_seq, len(written))


    def test_a_batch_of_stats_is_built_by_the_pump_and_dropped_whole_when_it_does_not_fit(self):
        class Batch:
            def __init__(self, first, count):
                self.first, self.count, self.built_on = first, count, None

            def records(self):
                self.built_on = threading.current_thread().name
                return [stats_record(self.first + i) for i in range(self.count)]

        written = []
        server = TrainerServer(run_config(), max_queued_stats=4, on_record_written=lambda record, line: written.append(record))
        self.addCleanup(server.close)
        fits, too_big = Batch(0, 3), Batch(100, 5)
        self.assertTrue(server.publish(fits))
        self.assertFalse(server.publish(too_big))
        self.assertEqual(server.dropped_stats, 5)
        self.assertTrue(server.flush(10))
        self.assertEqual(fits.built_on, "mxscope-publisher")
        self.assertIsNone(too_big.built_on, "a dropped batch is never built")
        self.assertEqual([r["step"] for r in written], [0, 1, 2])
        self.assertEqual(server.last_seq, 3)
        self.assertTrue(server.publish(Batch(7, 4)), "the queue's room came back once the pump sent the first batch")


if __name__ == "__main__":
    unittest.main()

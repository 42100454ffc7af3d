"""The conformance corpus (test/conformance/*.json, written by test/conformance/generate.ts) through
the bridge's validators: every case is classified as the TypeScript side classifies it (valid,
ignored, or invalid with the same error code and an error naming the same field). And everything
the bridge itself sends on the wire during a run passes the server-message rules."""
import json
import os
import tempfile
import unittest

import torch

from mxscope_bridge.messages import read_frame

from tests.helpers import TinyNet, bridge_for, train
from tests.wsclient import Client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = os.path.join(REPO, "test", "conformance")
KIND_TO_EXPECT = {"message": "valid", "unknown": "ignored", "invalid": "invalid"}


def corpus(name):
    with open(os.path.join(CORPUS_DIR, name), encoding="utf-8") as f:
        return json.load(f)


def js_stringify(value) -> str:
    """The frame as JSON.stringify writes it (what the TypeScript test feeds its reader)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Corpus(unittest.TestCase):
    def test_messages_are_classified_as_the_corpus_says_with_errors_naming_the_field(self):
        checked = 0
        for direction in ("client", "server"):
            for case in corpus(f"{direction}.json"):
                with self.subTest(f"{direction}: {case['name']}"):
                    frame = read_frame(js_stringify(case["message"]), direction)
                    self.assertEqual(KIND_TO_EXPECT[frame.kind], case["expect"], frame.reason)
                    if case["expect"] == "invalid":
                        self.assertEqual(frame.code, "invalid-message")
                        self.assertTrue(frame.reason.startswith(f"{case['path'] or '(root)'}: expected"),
                                        f"the error should name {case['path'] or '(root)'}: {frame.reason}")
                        self.assertTrue(case.get("rule"), "every invalid case names its rule")
                checked += 1
        print(f"\nconformance corpus: {checked} messages classified as the TypeScript side does")
        self.assertGreater(checked, 100)

    def test_raw_frames_depth_and_syntax_are_refused_with_the_documented_code(self):
        for case in corpus("frames.json"):
            with self.subTest(case["name"]):
                frame = read_frame(case["frame"], case["direction"])
                self.assertEqual(KIND_TO_EXPECT[frame.kind], case["expect"], frame.reason)
                if case["expect"] == "invalid":
                    self.assertEqual(frame.code, case["code"], frame.reason)


class BridgeOutput(unittest.TestCase):
    def test_every_frame_the_bridge_sends_during_a_run_is_a_valid_server_message(self):
        torch.manual_seed(0)
        model = TinyNet()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-test-"), stats_every=2)
        self.addCleanup(bridge.close)
        client = Client(bridge.server.connect_url)
        self.addCleanup(client.close)
        kinds = {}

        def read_until(last_type):
            while last_type not in kinds:
                opcode, payload = client.recv_frame()
                self.assertEqual(opcode, 0x1)
                frame = read_frame(payload.decode("utf-8"), "server")
                self.assertEqual(frame.kind, "message", frame.reason)
                kinds[frame.value["type"]] = kinds.get(frame.value["type"], 0) + 1

        client.send({"type": "subscribe", "id": "s"})
        read_until("nextRunConfig")
        bridge.start_run()
        train(model, bridge, 5)
        bridge.end_run()
        read_until("runEnded")
        self.assertEqual({k for k in kinds}, {"hello", "ack", "nextRunConfig", "runStarted", "step", "layerStats", "runEnded"})
        self.assertEqual(kinds["step"], 5)


if __name__ == "__main__":
    unittest.main()

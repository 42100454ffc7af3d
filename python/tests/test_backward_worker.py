"""The observing hooks' work runs on the bridge's backward worker thread and reports exactly what
running it inside the hooks reports; what it raises reaches the training thread."""
import tempfile
import threading
import unittest
from unittest import mock

import torch

from mxscope_bridge import observe
from mxscope_bridge.backward_worker import BackwardWorker
from tests.helpers import TinyNet, bridge_for, read_log, train


def records(inline: bool, threads: list):
    torch.manual_seed(0)
    model = TinyNet()
    bridge = bridge_for(model, tempfile.mkdtemp(), stats_every=3)
    if inline:
        bridge.backward_worker = None
    inner = observe._observe

    def noted(*args):
        threads.append(threading.current_thread().name)
        return inner(*args)
    with mock.patch.object(observe, "_observe", noted):
        bridge.start_run()
        train(model, bridge, 4)
        run_dir = bridge.run_dir
        bridge.end_run()
    bridge.close()
    return [dict(r, runId=None, stepMs=None) for r in read_log(run_dir) if r["type"] in ("layerStats", "step")]


class BackwardWorkerTest(unittest.TestCase):
    def test_the_worker_reports_what_the_hooks_report(self):
        on_worker, in_hooks = [], []
        got = records(False, on_worker)
        want = records(True, in_hooks)
        self.assertEqual(got, want)
        self.assertEqual(len([r for r in got if r["type"] == "layerStats"]), 2 * 3 * 5, "stats steps 0 and 3, 5 layers, 3 GEMMs")
        self.assertEqual(set(on_worker), {"mxscope-backward"})
        self.assertNotIn("mxscope-backward", in_hooks)

    def test_an_error_reaches_the_next_submit_or_drain_and_later_items_are_dropped(self):
        worker = BackwardWorker(depth=1)
        ran = []

        def fail():
            raise ValueError("layer 'x': broken")
        worker.submit(torch.device("cpu"), fail)
        with self.assertRaisesRegex(ValueError, "layer 'x': broken"):
            worker.drain()
        worker.submit(torch.device("cpu"), ran.append, 2)
        worker.drain()
        self.assertEqual(ran, [2], "the worker goes on after an error was handed over")

    def test_items_run_in_order_and_a_full_queue_makes_the_hook_wait(self):
        worker = BackwardWorker(depth=1)
        release, order = threading.Event(), []
        worker.submit(torch.device("cpu"), release.wait)
        worker.submit(torch.device("cpu"), order.append, 1)  # queued behind the blocked item
        blocked = threading.Thread(target=worker.submit, args=(torch.device("cpu"), order.append, 2))
        blocked.start()
        blocked.join(0.3)
        self.assertTrue(blocked.is_alive(), "a third item waits while the queue is full")
        release.set()
        blocked.join(5)
        worker.drain()
        self.assertEqual(order, [1, 2])


if __name__ == "__main__":
    unittest.main()

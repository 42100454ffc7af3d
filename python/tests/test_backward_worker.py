"""The observing hooks' work runs on the bridge's backward worker thread and reports exactly what
running it inside the hooks reports; what it raises reaches the training thread."""
import tempfile
import threading
import time
import unittest
from unittest import mock

import torch

from mxscope_bridge import observe
from mxscope_bridge.backward_worker import BackwardWorker
from tests.helpers import TinyNet, bridge_for, read_log, train


def run_log(inline: bool, stats_every: int, around_observe, train_steps) -> list:
    """The run log of a TinyNet trained by train_steps(model, bridge), the bridge's observing work
    running as around_observe(inner, *args); inline: in the hooks (no backward worker)."""
    torch.manual_seed(0)
    model = TinyNet()
    bridge = bridge_for(model, tempfile.mkdtemp(), stats_every=stats_every, **({"backward_thread": False} if inline else {}))
    inner = observe._observe
    with mock.patch.object(observe, "_observe", lambda *args: around_observe(inner, *args)):
        bridge.start_run()
        train_steps(model, bridge)
        run_dir = bridge.run_dir
        bridge.end_run()
    bridge.close()
    return read_log(run_dir)


def records(inline: bool, threads: list):
    def noted(inner, *args):
        threads.append(threading.current_thread().name)
        return inner(*args)
    log = run_log(inline, 3, noted, lambda model, bridge: train(model, bridge, 4))
    return [dict(r, runId=None, stepMs=None) for r in log if r["type"] in ("layerStats", "step")]


def records_with_update_before_end_step(inline: bool):
    """fp32 training whose optimizer steps between backward and end_step, with the observing work
    slowed down so that the worker reads the last layers' W after the update when it reads the parameter."""
    def slow(inner, *args):
        time.sleep(0.05)
        return inner(*args)

    def train_steps(model, bridge):
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        generator = torch.Generator().manual_seed(0)
        for step in range(3):
            bridge.begin_step(step)
            loss = model(torch.randn(4, 16, 64, generator=generator).requires_grad_()).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            bridge.end_step(loss=loss.item())
    return [dict(r, runId=None) for r in run_log(inline, 2, slow, train_steps) if r["type"] == "layerStats"]


class BackwardWorkerTest(unittest.TestCase):
    def test_an_optimizer_step_before_end_step_does_not_change_the_weights_observed(self):
        got = records_with_update_before_end_step(inline=False)
        want = records_with_update_before_end_step(inline=True)
        self.assertEqual(len(got), 2 * 5 * 3, "stats steps 0 and 2, 5 layers, 3 GEMMs")
        for g, w in zip(got, want):
            self.assertEqual(g, w, f"{g['layer']} {g['gemm']} at step {g['step']}: the worker saw W after the optimizer's update")

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


    def test_a_step_left_without_end_step_is_finished_before_the_next_begins(self):
        # A script that catches an exception after backward and goes on: the left step's queued work
        # must not run into the next step's sums, and what it raised is logged, not raised.
        torch.manual_seed(0)
        model = TinyNet()
        logged = []
        bridge = bridge_for(model, tempfile.mkdtemp(), stats_every=2, log=logged.append)
        self.addCleanup(bridge.close)
        bridge.start_run()
        release = threading.Event()
        bridge.begin_step(0)
        model(torch.randn(2, 16, 64)).pow(2).mean().backward()
        bridge.backward_worker.submit(torch.device("cpu"), release.wait)
        bridge.backward_worker.submit(torch.device("cpu"), lambda: 1 / 0)
        threading.Timer(0.2, release.set).start()
        bridge.begin_step(1)  # no end_step for step 0
        self.assertTrue(release.is_set(), "begin_step waited for the left step's work")
        self.assertTrue(any("the step before's telemetry failed: division by zero" in line for line in logged), logged)
        model(torch.randn(2, 16, 64)).pow(2).mean().backward()
        bridge.end_step(loss=0.0)

    def test_a_sharded_layers_weight_is_copied_for_the_worker(self):
        # FSDP2 frees the unsharded W that autograd saved once the layer's backward is done, before
        # the worker may read it: a layer whose weight is a DTensor (it has `placements`) hands the
        # worker a copy. Under bf16 autocast the saved W is autograd's cast, not the parameter's
        # memory, so only that rule copies it.
        def handed(sharded: bool):
            torch.manual_seed(0)
            model = TinyNet()
            if sharded:
                model.lm_head.weight.placements = ()  # the attribute DTensors have; no shard to gather
            bridge = bridge_for(model, tempfile.mkdtemp())
            self.addCleanup(bridge.close)
            given, observed = {}, {}
            dispatch, inner = observe._dispatch, observe._observe

            def noting_dispatch(bridge_, name, module, adapter, x, weight, *rest, **kwargs):
                if name == "lm_head" and weight is not None:
                    given["ptr"] = weight.data_ptr()
                return dispatch(bridge_, name, module, adapter, x, weight, *rest, **kwargs)

            def noting_observe(config, capture, state, name, x, weight, *rest):
                if name == "lm_head":
                    observed["ptr"] = weight.data_ptr()
                return inner(config, capture, state, name, x, weight, *rest)
            with mock.patch.object(observe, "_dispatch", noting_dispatch), mock.patch.object(observe, "_observe", noting_observe):
                bridge.start_run()
                bridge.begin_step(0)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(torch.randn(2, 8, 64).requires_grad_()).float().pow(2).mean()
                loss.backward()
                bridge.end_step(loss=loss.item())
                bridge.end_run()
            self.assertIsNotNone(bridge.backward_worker)
            self.assertIn("ptr", given, "lm_head's backward handed the hook autograd's saved W")
            return given["ptr"], observed["ptr"]
        saved, seen = handed(sharded=True)
        self.assertNotEqual(saved, seen, "the worker got autograd's saved W itself, which FSDP2 frees after the layer's backward")
        saved, seen = handed(sharded=False)
        self.assertEqual(saved, seen, "an unsharded layer's saved W (autocast's own copy) is handed over as it is")


#: GPU time long enough that, were an ordering missing, the other stream would overtake the worker's.
SLEEP_CYCLES = 200_000_000


@unittest.skipUnless(torch.cuda.is_available(), "the worker's own stream needs CUDA")
class WorkerStreamTest(unittest.TestCase):
    """The worker's kernels run on a stream of their own (beside the trainer's backward); each test
    fails when one of the three orderings that keep its results those of the hook is left out."""

    def setUp(self):
        self.worker = BackwardWorker()
        self.device = torch.device("cuda", torch.cuda.current_device())

    def test_the_work_runs_on_its_own_stream(self):
        seen = []
        self.worker.submit(self.device, lambda: seen.append(torch.cuda.current_stream(self.device)))
        self.worker.drain()
        self.assertEqual(seen, [self.worker.stream(self.device)])
        self.assertNotEqual(seen[0], torch.cuda.current_stream(self.device))

    def test_an_item_waits_for_what_the_trainers_stream_was_given_before_it(self):
        x = torch.zeros(1 << 20, device=self.device)
        torch.cuda._sleep(SLEEP_CYCLES)
        x.fill_(3.0)  # queued behind the sleep on the trainer's stream
        out = {}
        self.worker.submit(self.device, lambda t: out.setdefault("sum", t.sum()), x)
        self.worker.drain()
        self.assertEqual(out["sum"].item(), 3.0 * (1 << 20))

    def test_memory_handed_to_an_item_goes_to_nothing_else_until_its_kernels_are_done(self):
        x = torch.ones(1 << 20, device=self.device)
        out, launched = {}, threading.Event()

        def work(t):
            torch.cuda._sleep(SLEEP_CYCLES)  # on the worker's stream, before it reads t
            out["sum"] = t.sum()
        self.worker.submit(self.device, work, x)
        self.worker.submit(self.device, launched.set)  # runs once the first item has let go of x
        launched.wait(10)
        del x  # autograd drops its own references as soon as the hook returns
        reused = torch.full((1 << 20,), 7.0, device=self.device)  # the freed block, were it not marked
        self.worker.drain()
        self.assertEqual(out["sum"].item(), float(1 << 20))
        self.assertEqual(reused[0].item(), 7.0)

    def test_after_drain_the_trainers_stream_reads_what_the_work_wrote(self):
        out = torch.zeros(1 << 20, device=self.device)

        def work(t):
            torch.cuda._sleep(SLEEP_CYCLES)
            t.fill_(5.0)
        self.worker.submit(self.device, work, out)
        self.worker.drain()
        self.assertEqual(out.sum().item(), 5.0 * (1 << 20))  # on the trainer's stream


if __name__ == "__main__":
    unittest.main()

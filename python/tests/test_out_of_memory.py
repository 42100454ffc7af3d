"""The device running out of memory while the bridge measures a step: the step's layer stats are
dropped and said so, and the trainer's step goes on as it would without the bridge."""
import tempfile
import unittest
from unittest import mock

import torch

from mxscope_bridge import wgrad_error

from tests.helpers import TinyNet, run_and_read


def failing_at(step: int, layer: str, error: BaseException, calls=None):
    """WgradErrors._reduce raising `error` for `layer` at `step` (the bridge's own device work);
    `calls` gets the (step, layer) of every call."""
    reduce = wgrad_error.WgradErrors._reduce

    def failing(self, name, *args):
        if calls is not None:
            calls.append((self.step, name))
        if self.step == step and name == layer:
            raise error
        return reduce(self, name, *args)
    return mock.patch.object(wgrad_error.WgradErrors, "_reduce", failing)


OOM = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 79.11 GiB total capacity)\nmore text")


class OutOfDeviceMemory(unittest.TestCase):
    def run_steps(self, steps=10, **kwargs):
        """(records, log lines, final weights) of a TinyNet run at statsEvery 3 (stats steps 0, 3, 6, 9;
        steps 2, 5, 8 keep E for lag-1)."""
        torch.manual_seed(0)
        model = TinyNet()
        lines = []
        _, records, _ = run_and_read(self, model, tempfile.mkdtemp(prefix="mxscope-oom-"), steps, stats_every=3, log=lines.append, **kwargs)
        return records, lines, [p.detach().clone() for p in model.parameters()]

    def stats_steps(self, records):
        return sorted({r["step"] for r in records if r["type"] == "layerStats"})

    def lag1(self, records, step):
        return {r["layer"]: r["wgradError"]["lag1Cos"] for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad" and r["step"] == step}

    def test_a_stats_step_out_of_memory_drops_its_stats_and_training_goes_on(self):
        for inline in (False, True):
            with self.subTest(backward_thread=not inline):
                want, _, weights = self.run_steps(backward_thread=not inline)
                with failing_at(3, "blocks.0.up", OOM):
                    got, lines, got_weights = self.run_steps(backward_thread=not inline)
                self.assertEqual(self.stats_steps(got), [0, 6, 9], "step 3's records dropped, every other stats step's kept")
                self.assertEqual([dict(r, runId=None) for r in got if r["type"] == "layerStats"],
                                 [dict(r, runId=None) for r in want if r["type"] == "layerStats" and r["step"] != 3], "the other steps' records as they were")
                self.assertEqual([r["step"] for r in got if r["type"] == "step"], list(range(10)), "every step recorded")
                self.assertTrue(all(torch.equal(a, b) for a, b in zip(got_weights, weights)), "the trainer's steps are the bits of a run without the failure")
                dropped = [line for line in lines if "dropped" in line]
                self.assertEqual(len(dropped), 1, lines)
                self.assertIn("step 3's layer stats are dropped: the bridge ran out of device memory measuring blocks.0.up "
                              "(CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 79.11 GiB total capacity))", dropped[0])

    def test_nothing_more_is_measured_once_the_step_is_dropped(self):
        calls = []
        with failing_at(3, "lm_head", OOM, calls):  # the first layer backward reaches
            self.run_steps(steps=4)
        self.assertEqual([layer for step, layer in calls if step == 3], ["lm_head"], "the other four layers' work skipped")

    def test_out_of_memory_before_a_stats_step_leaves_it_without_lag1(self):
        with failing_at(5, "blocks.0.up", OOM):  # the last layer backward reaches: the others have stored their E
            got, lines, _ = self.run_steps()
        self.assertEqual(self.stats_steps(got), [0, 3, 6, 9], "a pre-stats step publishes no layer stats anyway")
        self.assertEqual(set(self.lag1(got, 6).values()), {None}, "nothing of step 5's E kept")
        self.assertTrue(all(value is not None for value in self.lag1(got, 3).values()))
        self.assertTrue(all(value is not None for value in self.lag1(got, 9).values()))
        self.assertIn("step 5's layer stats are dropped", " ".join(lines))
        self.assertIn("the next stats step reports no lag-1", " ".join(lines))

    def test_other_errors_still_reach_the_trainer(self):
        with failing_at(3, "blocks.0.up", RuntimeError("a bug in the bridge")):
            with self.assertRaisesRegex(RuntimeError, "a bug in the bridge"):
                self.run_steps()


if __name__ == "__main__":
    unittest.main()

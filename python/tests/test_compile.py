"""A torch.compile'd model under the bridge: capturing steps run eagerly (the hooks attach and
detach without recompiling at every capturing step), emulated GEMMs stay out of the graphs.
Needs torch 2.6+ (torch.compiler.set_stance): skipped on older torch, e.g. Debian's 1.13."""
import tempfile
import unittest

import torch

from tests.helpers import TinyNet, bridge_for, read_log

COMPILES = hasattr(getattr(torch, "compiler", None), "set_stance")


@unittest.skipUnless(COMPILES, "torch.compiler.set_stance needs torch 2.6+")
class Compiled(unittest.TestCase):
    def train(self, emulate):
        import torch._dynamo
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = TinyNet()
        compiled = torch.compile(model, backend="eager")
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-compile-"), stats_every=3, emulate=emulate)
        self.addCleanup(bridge.close)
        bridge.start_run()
        frames = []
        for step in range(9):
            bridge.begin_step(step)
            compiled(torch.randn(2, 8, 64)).pow(2).mean().backward()
            bridge.end_step(loss=0.0)
            model.zero_grad()
            frames.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
        run_dir = bridge.run_dir
        bridge.end_run()
        return frames, read_log(run_dir)

    def test_observed_steps_run_eagerly_without_recompiling(self):
        graphs, records = self.train(emulate=False)
        self.assertEqual(graphs[0], 0, f"the first step captures: nothing compiled then ({graphs})")
        self.assertGreater(graphs[1], 0, "the step with nothing to capture runs compiled")
        self.assertEqual(graphs[-1], graphs[1], f"no graph compiled after that ({graphs})")
        stats = [r for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad" and r["layer"] == "lm_head"]
        self.assertEqual([r["step"] for r in stats], [0, 3, 6])
        self.assertIsNotNone(stats[-1]["wgradError"]["lag1Cos"])
        self.assertFalse(torch.compiler.is_compiling())

    def test_emulated_and_compiled(self):
        _, records = self.train(emulate=True)
        stats = [r for r in records if r["type"] == "layerStats" and r["layer"] == "lm_head" and r["gemm"] == "fprop"]
        self.assertEqual([r["step"] for r in stats], [0, 3, 6])

"""Module coverage: nn.Linear subclasses, modules returning (output, bias), include/exclude by name
or glob, and a LinearLike adapter for a fused norm + linear whose GEMM input is the normalized X."""
import tempfile
import unittest

import torch
import torch.nn.functional as F

from mxscope_bridge import LinearLike, mxfp4
from mxscope_bridge.rotation import make_rotation, rotate

from tests.helpers import TinyNet, bridge_for, run_and_read


class ScaledLinear(torch.nn.Linear):
    """An nn.Linear subclass (as quantization and LoRA libraries write them)."""


class RowParallelLinear(torch.nn.Module):
    """Megatron-style: returns (output, bias) and leaves adding the bias to the caller."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.linear(x, self.weight), self.bias


class LayerNormLinear(torch.nn.Module):
    """A fused LayerNorm + Linear (TransformerEngine-style): one module, its own weight; the GEMM
    input is the normalized X, not the module's input."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.ln_weight = torch.nn.Parameter(torch.ones(n_in))
        self.weight = torch.nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)

    def normed(self, x):
        return F.layer_norm(x, x.shape[-1:], self.ln_weight)

    def forward(self, x):
        return F.linear(self.normed(x), self.weight)


class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = ScaledLinear(64, 64)
        self.row = RowParallelLinear(64, 64)
        self.fused = LayerNormLinear(64, 32)

    def forward(self, x):
        y, bias = self.row(self.proj(x))
        return self.fused(y + bias)


def input_stats(records, layer):
    return next(r for r in records if r["type"] == "layerStats" and r["layer"] == layer and r["gemm"] == "fprop")["operands"][0]


class Modules(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-modules-")

    def records(self, model, steps=1, **kwargs):
        return run_and_read(self, model, self.out, steps, **kwargs)[1]

    def test_subclasses_tuple_outputs_and_an_adapter_all_report(self):
        torch.manual_seed(0)
        model = Mixed()
        seen = {}

        def keep_gemm_input(module, inputs, output):
            seen.setdefault("x", module.normed(inputs[0]).detach().reshape(-1, 64))
        model.fused.register_forward_hook(keep_gemm_input)
        records = self.records(model, include=["proj", "row"], adapters={"fused": LinearLike(gemm_input=lambda m, inputs, out: m.normed(inputs[0]))})
        self.assertEqual([layer["name"] for layer in records[0]["layers"]], ["proj", "row", "fused"])
        stats = {(r["layer"], r["gemm"]) for r in records if r["type"] == "layerStats"}
        self.assertEqual(stats, {(layer, gemm) for layer in ("proj", "row", "fused") for gemm in ("fprop", "dgrad", "wgrad")},
                         "the (output, bias) module gets records for all three GEMMs")
        # The fused module is measured on the normalized input that enters its GEMM.
        q = mxfp4.quantize(rotate(seen["x"], make_rotation("hadamard", 32, 64, torch.device("cpu"))))
        exps = q.shared_exp.tolist()
        self.assertEqual(input_stats(records, "fused")["histogram"]["counts"], [exps.count(e) for e in range(min(exps), max(exps) + 1)])

    def test_exclude_and_include_by_glob(self):
        torch.manual_seed(0)
        records = self.records(TinyNet(), exclude=["blocks.*.down"])
        self.assertEqual([layer["name"] for layer in records[0]["layers"]], ["blocks.0.up", "blocks.1.up", "lm_head"])
        self.assertEqual({r["layer"] for r in records if r["type"] == "layerStats"}, {"blocks.0.up", "blocks.1.up", "lm_head"})
        records = self.records(TinyNet(), include=["blocks.1.*"])
        self.assertEqual([layer["name"] for layer in records[0]["layers"]], ["blocks.1.up", "blocks.1.down"])

    def test_patterns_that_match_nothing_and_modules_without_a_weight_are_named(self):
        with self.assertRaisesRegex(ValueError, r"\['lm_haed'\] match no module"):
            bridge_for(TinyNet(), self.out, exclude=["lm_haed"])
        with self.assertRaisesRegex(ValueError, r"module 'blocks.0' \(ModuleDict\) was chosen for observation but has no 2-D weight"):
            bridge_for(TinyNet(), self.out, include=["blocks.0"])

    def test_linears_inside_an_adapted_module_are_not_observed_twice(self):
        class Wrapper(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = torch.nn.Linear(64, 64)

            def forward(self, x):
                return self.inner(x)
        bridge = bridge_for(torch.nn.Sequential(Wrapper()), self.out, adapters={"0": LinearLike(weight=lambda m: m.inner.weight)})
        self.addCleanup(bridge.close)
        self.assertEqual([name for name, _, _ in bridge.layers], ["0"])


if __name__ == "__main__":
    unittest.main()


class SilentLayers(unittest.TestCase):
    def test_a_layer_the_step_does_not_call_is_named_once(self):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
                self.up = torch.nn.Linear(64, 64)
                self.unused = torch.nn.Linear(64, 64)  # never called

            def forward(self, x):
                return self.up(self.attn(x, x, x, need_weights=False)[0])

        lines = []
        model = Net()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-silent-"), stats_every=1, log=lines.append)
        self.addCleanup(bridge.close)
        bridge.start_run()
        for step in range(2):
            bridge.begin_step(step)
            model(torch.randn(2, 8, 64)).sum().backward()
            bridge.end_step(loss=0.0)
        named = [line for line in lines if "got no stats" in line]
        self.assertEqual(len(named), 1, lines)
        self.assertIn("unused", named[0])
        self.assertTrue(named[0].startswith("1 observed layers"), "the attention's GEMMs ran: only the unused layer is named")

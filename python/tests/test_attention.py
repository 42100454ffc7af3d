"""nn.MultiheadAttention's GEMMs (the in-projection it multiplies itself, its out_proj whose
forward never runs) observed and emulated as layers."""
import math
import tempfile
import unittest

import torch
import torch.nn.functional as F

from mxscope_bridge import layers

from tests.helpers import bridge_for, read_log


class Net(torch.nn.Module):
    def __init__(self, kdim=None):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(64, 4, batch_first=True, kdim=kdim, vdim=kdim)
        self.up = torch.nn.Linear(64, 64)
        self.kdim = kdim or 64

    def forward(self, x):
        kv = x if self.kdim == 64 else x[..., :self.kdim]
        return self.up(self.attn(x, kv, kv, need_weights=False)[0])


def run(model, emulate=False, steps=3):
    bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-attention-"), stats_every=2, emulate=emulate)
    bridge.start_run()
    generator = torch.Generator().manual_seed(0)
    for step in range(steps):
        bridge.begin_step(step)
        model(torch.randn(2, 8, 64, generator=generator)).pow(2).mean().backward()
        bridge.end_step(loss=0.0)
        if step < steps - 1:
            model.zero_grad()
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    return {(r["step"], r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}


class Attention(unittest.TestCase):
    def test_its_gemms_are_layers(self):
        self.assertEqual([n for n, _, _ in layers.observed_modules(Net())], ["attn.in_proj", "attn.out_proj", "up"])
        self.assertEqual([n for n, _, _ in layers.observed_modules(Net(kdim=32))], ["attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj", "up"])

    def test_observed_gradients_are_the_weights(self):
        torch.manual_seed(0)
        model = Net()
        records = run(model)
        for layer, weight in (("attn.in_proj", model.attn.in_proj_weight), ("attn.out_proj", model.attn.out_proj.weight)):
            error = records[(2, layer, "wgrad")]["wgradError"]
            self.assertTrue(math.isclose(error["gradNorm"], weight.grad.norm().item(), rel_tol=1e-5), layer)
            self.assertTrue(records[(2, layer, "fprop")]["simulated"], layer)
        self.assertEqual(records[(2, "attn.in_proj", "fprop")]["operands"][0]["elements"], 2 * 8 * 64)
        self.assertIsNotNone(records[(2, "attn.in_proj", "wgrad")]["wgradError"]["lag1Cos"])
        self.assertIs(F.linear, torch._C._nn.linear, "torch.nn.functional.linear is given back")

    def test_separate_projections(self):
        torch.manual_seed(0)
        model = Net(kdim=32)
        records = run(model, steps=1)
        for label in ("q_proj", "k_proj", "v_proj"):
            error = records[(0, f"attn.{label}", "wgrad")]["wgradError"]
            self.assertTrue(math.isclose(error["gradNorm"], getattr(model.attn, f"{label}_weight").grad.norm().item(), rel_tol=1e-5), label)

    def test_emulated(self):
        torch.manual_seed(0)
        model = Net()
        x = torch.randn(2, 8, 64)
        plain = model(x)
        records = run(model, emulate=True, steps=1)
        self.assertNotIn("simulated", records[(0, "attn.in_proj", "fprop")], "emulated: its stats are the GEMM's own")
        self.assertNotIn("simulated", records[(0, "attn.out_proj", "fprop")])
        self.assertFalse(torch.equal(model(x), plain), "the attention's GEMMs run in MXFP4")
        self.assertIs(F.linear, torch._C._nn.linear)

    def test_linear_is_given_back_when_the_forward_raises(self):
        model = Net()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-attention-"), stats_every=1)
        self.addCleanup(bridge.close)
        bridge.start_run()
        bridge.begin_step(0)
        with self.assertRaises(RuntimeError):
            model.attn(torch.randn(2, 8, 64), torch.randn(2, 8, 48), torch.randn(2, 8, 48))  # wrong key width
        self.assertIs(F.linear, torch._C._nn.linear)


if __name__ == "__main__":
    unittest.main()

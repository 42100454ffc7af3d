"""GPT-2-style Conv1D layers (Y = X·W + b, W stored [in, out]) are observed and emulated as the
linear layers they are, without an adapter."""
import math
import tempfile
import unittest

import torch

from mxscope_bridge import emulate, layers

from tests.helpers import bridge_for, mx_gemms, read_log


class Conv1D(torch.nn.Module):
    """The layout of transformers' pytorch_utils.Conv1D: `nf` outputs, weight [nx, nf]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = torch.nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], self.nf)


class Net(torch.nn.Module):
    def __init__(self, transposed=True):
        super().__init__()
        self.c_fc = Conv1D(96, 64) if transposed else torch.nn.Linear(64, 96)
        self.lm_head = torch.nn.Linear(96, 32, bias=False)

    def forward(self, x):
        return self.lm_head(torch.nn.functional.gelu(self.c_fc(x)))


def as_linear(conv: Net) -> Net:
    twin = Net(transposed=False)
    with torch.no_grad():
        twin.c_fc.weight.copy_(conv.c_fc.weight.t())
        twin.c_fc.bias.copy_(conv.c_fc.bias)
        twin.lm_head.weight.copy_(conv.lm_head.weight)
    return twin


class TransposedLinear(unittest.TestCase):
    def test_found_with_its_out_and_in_features(self):
        found = {name: adapter for name, _, adapter in layers.observed_modules(Net())}
        self.assertEqual(sorted(found), ["c_fc", "lm_head"])
        self.assertIs(found["c_fc"], layers.TRANSPOSED_LINEAR)
        self.assertIs(found["lm_head"], layers.DEFAULT_ADAPTER)
        self.assertFalse(layers.is_transposed_linear(torch.nn.Conv1d(4, 4, 1)), "torch's own Conv1d is a convolution")

    def test_observed_wgrad_error_is_its_gradient(self):
        torch.manual_seed(0)
        model = Net()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-conv1d-"), stats_every=2)
        bridge.start_run()
        bridge.begin_step(0)
        model(torch.randn(4, 16, 64)).pow(2).mean().backward()
        bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        records = read_log(run_dir)
        started = next(r for r in records if r["type"] == "runStarted")
        c_fc = next(layer for layer in started["layers"] if layer["name"] == "c_fc")
        self.assertEqual((c_fc["outFeatures"], c_fc["inFeatures"]), (96, 64))
        wgrad = next(r for r in records if r["type"] == "layerStats" and r["layer"] == "c_fc" and r["gemm"] == "wgrad")
        self.assertTrue(math.isclose(wgrad["wgradError"]["gradNorm"], model.c_fc.weight.grad.norm().item(), rel_tol=1e-5))
        fprop = next(r for r in records if r["type"] == "layerStats" and r["layer"] == "c_fc" and r["gemm"] == "fprop")
        self.assertEqual([o["blocks"] for o in fprop["operands"]], [4 * 16 * 2, 96 * 2], "X and W in blocks along in = 64")

    def test_emulated_like_the_linear_layer_it_is(self):
        torch.manual_seed(0)
        conv = Net()
        linear = as_linear(conv)
        x = torch.randn(4, 16, 64)
        grads = []
        for model in (conv, linear):
            emulate(model, mx_gemms())
            model(x).pow(2).mean().backward()
            grads.append(model.c_fc.weight.grad)
        self.assertTrue(torch.equal(grads[0].t(), grads[1]), "the same emulated ∇W, transposed")
        self.assertTrue(torch.equal(conv(x), linear(x)))
        self.assertFalse(torch.equal(conv.c_fc(x), Conv1D.forward(conv.c_fc, x)), "its GEMMs ran in MXFP4")


if __name__ == "__main__":
    unittest.main()

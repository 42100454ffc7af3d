"""Layers that read one input (q, k and v of an attention): X's MXFP4 is made once and reused, and the
records are exactly those of quantizing it per layer."""
import tempfile
import unittest
from unittest import mock

import torch

from mxscope_bridge import default_gemms, gemm_config, mx_ops, observe
from tests.helpers import bridge_for, read_log


class Attention(torch.nn.Module):
    """A normalized input read by three projections (autocast gives each its own bf16 copy), then one more."""

    def __init__(self, dim=64):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(dim))
        self.q, self.k, self.v = (torch.nn.Linear(dim, out, bias=False) for out in (64, 32, 32))
        self.o = torch.nn.Linear(64, dim, bias=False)

    def forward(self, x):
        h = x * self.scale
        q, k, v = self.q(h), self.k(h), self.v(h)
        mixed = q + torch.cat([k, v], dim=-1) * q
        return self.o(mixed)


def run(out_dir, gemms, share=True, autocast=False, steps=3):
    """Records of a few steps (stats every 2: pre-stats and stats steps) and how many operands were quantized."""
    torch.manual_seed(0)
    model = Attention()
    bridge = bridge_for(model, out_dir, gemms=gemms, stats_every=2)
    calls = []
    quantize = mx_ops.quantize_operand

    def counted(*args, **kwargs):
        calls.append(1)
        return quantize(*args, **kwargs)
    shared_for = observe.ObserveState.shared_for
    with mock.patch.object(mx_ops, "quantize_operand", counted), \
            mock.patch.object(observe.ObserveState, "shared_for", shared_for if share else lambda self, source, held: None):
        bridge.start_run()
        generator = torch.Generator().manual_seed(1)
        for step in range(steps):
            bridge.begin_step(step)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = model(torch.randn(2, 32, 64, generator=generator)).float().pow(2).mean()
            loss.backward()
            bridge.end_step(loss=loss)
            model.zero_grad()
        run_dir = bridge.run_dir
        bridge.end_run()
    bridge.close()
    return [r for r in read_log(run_dir) if r["type"] in ("layerStats", "step")], len(calls)


class SharedInput(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp()

    def check(self, gemms, autocast, saved):
        shared, shared_calls = run(self.out, gemms, True, autocast)
        alone, alone_calls = run(self.out, gemms, False, autocast)
        self.assertEqual(len(shared), len(alone))
        for a, b in zip(shared, alone):
            a, b = dict(a, runId=None), dict(b, runId=None)
            a.pop("stepMs", None), b.pop("stepMs", None)
            self.assertEqual(a, b)
        self.assertEqual(alone_calls - shared_calls, saved)
        return shared

    def test_q_k_v_reuse_the_mxfp4_of_their_input_and_report_the_same(self):
        # Two stats steps (0, 2) and one pre-stats step (1): fprop X and wgrad Xᵀ of k and v are reused
        # on stats steps (4 each), wgrad Xᵀ on the pre-stats step (2).
        for autocast in (False, True):
            records = self.check(default_gemms(gemm_config("mxfp4", "hadamard", 32)), autocast, saved=2 * 4 + 2)
            fprop_x = {r["layer"]: r["operands"][0] for r in records if r.get("gemm") == "fprop" and r["step"] == 2}
            self.assertEqual(fprop_x["q"], fprop_x["k"])
            self.assertNotEqual(fprop_x["q"], fprop_x["o"])

    def test_random_rotations_and_stochastic_rounding_quantize_each_layer_anew(self):
        for rotation, rounding in (("random-hadamard", "nearest-even"), ("hadamard", "stochastic")):
            gemms = default_gemms(gemm_config("mxfp4", rotation, 32, rounding))
            _, shared_calls = run(self.out, gemms, True)
            _, alone_calls = run(self.out, gemms, False)
            self.assertEqual(shared_calls, alone_calls, (rotation, rounding))


if __name__ == "__main__":
    unittest.main()

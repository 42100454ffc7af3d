"""Real kernels' tensors: a trainer hands over the operand its MXFP4 kernel quantized (E8M0 scales +
FP4 codes, dequantized values, or a torchao MXTensor) and the stats describe those scales."""
import tempfile
import types
import unittest

import torch

from mxscope_bridge import mxfp4, stats
from mxscope_bridge.kernel import codes_of, from_mx_tensor, kernel_quantized, pack_fp4, unpack_fp4

from tests.helpers import bridge_for, read_log

E8M0 = getattr(torch, "float8_e8m0fnu", None)  # torch >= 2.7; torch 1.13 keeps E8M0 in uint8
FP4X2 = getattr(torch, "float4_e2m1fn_x2", None)


def mx_layout(x, old=False):
    """x quantized by our quantizer, written the way torchao's MXTensor holds it."""
    q = mxfp4.quantize(x)
    scale = (q.shared_exp + 127).to(torch.uint8).masked_fill(q.nan_block, 255).reshape(*x.shape[:-1], -1)
    packed = pack_fp4(codes_of(q, x.shape[-1]))
    if E8M0 is not None:
        scale = scale.view(E8M0)
    if old:
        return types.SimpleNamespace(_data=packed, _scale_e8m0=scale, _elem_dtype="fp4_e2m1", _block_size=32), q
    elem = FP4X2 if FP4X2 is not None else "fp4_e2m1"
    return types.SimpleNamespace(qdata=packed.view(FP4X2) if FP4X2 is not None else packed, scale=scale, elem_dtype=elem, block_size=32), q


def sums_equal(test, a, b):
    test.assertEqual((a.elements, a.padded), (b.elements, b.padded))
    test.assertEqual(a.counts.tolist(), b.counts.tolist())
    test.assertEqual(a.hist.tolist(), b.hist.tolist())
    torch.testing.assert_close(a.energies, b.energies)


class KernelLayouts(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.x = torch.randn(6, 96) * torch.logspace(-3, 3, 96)
        self.x[2, 40] = float("inf")  # one NaN-scale block
        self.x[4, :] = 0

    def test_torchao_layouts_give_the_stats_of_our_quantizer(self):
        finite = self.x.nan_to_num(posinf=7.5)  # codes inside a NaN-scale block mean nothing: compared apart
        for old in (False, True):
            t, q = mx_layout(finite, old)
            got = kernel_quantized(**from_mx_tensor(t), original=finite)
            sums_equal(self, stats.operand_sums(got), stats.operand_sums(q))
            torch.testing.assert_close(got.values, q.values)
            t, q = mx_layout(self.x, old)
            hist = stats.operand_sums(kernel_quantized(**from_mx_tensor(t), original=self.x)).hist
            self.assertEqual(hist.tolist(), stats.operand_sums(q).hist.tolist())
            self.assertEqual(hist[mxfp4.NAN_BIN].item(), 1, "the inf's block has the NaN scale 0xFF")

    def test_codes_and_values_without_the_original(self):
        x = self.x.nan_to_num(posinf=0.0)
        t, q = mx_layout(x)
        scale = t.scale.view(torch.uint8) if E8M0 is not None else t.scale
        by_codes = stats.operand_sums(kernel_quantized(scale, codes=unpack_fp4(t.qdata.view(torch.uint8) if FP4X2 is not None else t.qdata)))
        by_values = stats.operand_sums(kernel_quantized(scale, values=q.values))
        sums_equal(self, by_codes, by_values)
        self.assertEqual(by_codes.hist.tolist(), stats.operand_sums(q).hist.tolist(), "the histogram is the kernel's scales")
        self.assertEqual(by_codes.energies[1].item(), 0.0, "no original: no noise is known (sqnrDb null)")

    def test_unpacking_order(self):
        codes = torch.tensor([[1, 2, 3, 15]], dtype=torch.uint8)
        self.assertEqual(pack_fp4(codes).tolist(), [[0x21, 0xF3]])
        self.assertEqual(unpack_fp4(pack_fp4(codes, "high-first"), "high-first").tolist(), codes.tolist())

    def test_bad_layouts_are_named(self):
        t, _ = mx_layout(self.x)
        with self.assertRaisesRegex(ValueError, "MX block size 16 is not 32"):
            kernel_quantized(**dict(from_mx_tensor(t), block_size=16))
        with self.assertRaisesRegex(ValueError, "17 scales for 6 rows of 96 elements; expected 18"):
            kernel_quantized(torch.zeros(17, dtype=torch.uint8), codes=torch.zeros(6, 96, dtype=torch.uint8))
        with self.assertRaisesRegex(ValueError, "bridge reads MXFP4"):
            from_mx_tensor(types.SimpleNamespace(qdata=t.qdata, scale=t.scale, elem_dtype="float8_e4m3fn", block_size=32))
        with self.assertRaisesRegex(ValueError, "off the E2M1 grid"):
            kernel_quantized(torch.full((18,), 127, dtype=torch.uint8), values=torch.full((6, 96), 5.0))


def train_handing_layer_0s_x(bridge, model, x, raw, q, steps):
    """Steps in which a trainer's kernel hands the bridge layer "0"'s quantized X on every stats step."""
    for step in range(steps):
        bridge.begin_step(step)
        if bridge.wants_stats:
            bridge.kernel_operand("0", "fprop", "x", scale=raw, codes=codes_of(q, 64), original=x)
        model(x).sum().backward()
        bridge.end_step(loss=0.0)


class KernelThroughTheBridge(unittest.TestCase):
    def test_a_kernel_operand_replaces_the_simulated_one_on_stats_steps(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 32))
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-kernel-"), stats_every=2, precision="mxfp4")
        self.addCleanup(bridge.close)
        bridge.start_run()
        x = torch.randn(16, 64)
        # A kernel whose scales are one binade higher than ours (e.g. another scale rounding).
        t, q = mx_layout(x)
        raw = (t.scale.view(torch.uint8) if E8M0 is not None else t.scale) + 1
        train_handing_layer_0s_x(bridge, model, x, raw, q, steps=3)
        with self.assertRaisesRegex(ValueError, "layer 'nope' is not observed"):
            bridge.kernel_operand("nope", "fprop", "x", scale=raw)
        with self.assertRaisesRegex(ValueError, "'fprop' has no operand 'dy'"):
            bridge.kernel_operand("0", "fprop", "dy", scale=raw)
        run_dir = bridge.run_dir
        bridge.end_run()
        fprop = [r for r in read_log(run_dir) if r["type"] == "layerStats" and r["gemm"] == "fprop"]
        self.assertEqual([r["step"] for r in fprop], [0, 2])
        ours = stats.operand_records(["x"], stats.operand_vectors([stats.operand_sums(mxfp4.quantize(x))]))[0]
        for r in fprop:
            kernel_x, w = r["operands"]
            self.assertTrue(kernel_x["kernel"])
            self.assertNotIn("kernel", w)
            self.assertEqual(kernel_x["histogram"]["minExp"], ours["histogram"]["minExp"] + 1, "the kernel's scales, not ours")
            self.assertEqual(kernel_x["histogram"]["counts"], ours["histogram"]["counts"])
            self.assertEqual(r["precision"], "mxfp4")

    def test_with_layer_groups_a_kernel_operand_counts_only_on_its_groups_stats_steps(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 32))
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-kernel-"), stats_every=2, precision="mxfp4")
        self.addCleanup(bridge.close)
        bridge.start_run(config=dict(bridge.config, statsLayerGroups=2))  # layer "0" reports at steps 0 and 4, layer "1" at 2
        x = torch.randn(16, 64)
        t, q = mx_layout(x)
        raw = t.scale.view(torch.uint8) if E8M0 is not None else t.scale
        train_handing_layer_0s_x(bridge, model, x, raw, q, steps=5)
        run_dir = bridge.run_dir
        bridge.end_run()
        fprop = [(r["step"], r["layer"], r["operands"][0].get("kernel", False)) for r in read_log(run_dir) if r["type"] == "layerStats" and r["gemm"] == "fprop"]
        self.assertEqual(fprop, [(0, "0", True), (2, "1", False), (4, "0", True)])


if __name__ == "__main__":
    unittest.main()

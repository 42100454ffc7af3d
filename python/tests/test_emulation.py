"""Emulated GEMMs: each of Fprop, Dgrad and Wgrad equals the product of its quantized operands."""
import unittest

import torch

from mxscope_bridge import default_gemms, emulate, gemm_config, mxfp4
from mxscope_bridge.draws import Draws, operand_key
from mxscope_bridge.precision import E4M3, E5M2, round_to_float
from mxscope_bridge.rotation import make_rotation, rotate


def q(x, r=None):
    return mxfp4.quantize(rotate(x, r)).values



def keyed(x: torch.Tensor) -> Draws:
    """Draws keyed to x, as a GEMM call on x gets them."""
    return Draws(0, operand_key(0, "test", x))

class Rotation(unittest.TestCase):
    def test_rotating_both_operands_keeps_the_exact_product(self):
        torch.manual_seed(0)
        a, b = torch.randn(8, 128, dtype=torch.float64), torch.randn(5, 128, dtype=torch.float64)
        for mode in ("hadamard", "random-hadamard"):
            for block in (16, 32, 64, 128):
                r = make_rotation(mode, block, 128, torch.device("cpu"), Draws(1, operand_key(1, "t", a, b)))
                product = rotate(a, r) @ rotate(b, r).t()
                torch.testing.assert_close(product.double(), a @ b.t(), rtol=1e-5, atol=1e-4)

    def test_a_block_that_does_not_divide_the_dimension_pads_both_operands(self):
        torch.manual_seed(0)
        a, b = torch.randn(8, 82, dtype=torch.float64), torch.randn(5, 82, dtype=torch.float64)
        for mode in ("hadamard", "random-hadamard"):
            r = make_rotation(mode, 32, 82, torch.device("cpu"), Draws(1, operand_key(1, "t", a, b)))
            ra, rb = rotate(a, r), rotate(b, r)
            self.assertEqual(ra.shape, (8, 96), "82 zero-padded to the next multiple of 32")
            torch.testing.assert_close((ra @ rb.t()).double(), a @ b.t(), rtol=1e-5, atol=1e-4)
        self.assertIsNone(make_rotation("hadamard", 32, 82, torch.device("cpu"), misfit="skip"))


class Formats(unittest.TestCase):
    def test_fp8_grids(self):
        x = torch.tensor([0.3, 1000.0, -3e-3, 0.0, 17.0])  # -3e-3 is subnormal in E4M3: steps of 2^-9
        self.assertEqual(round_to_float(x, E4M3).tolist(), [0.3125, 448.0, -0.00390625, 0.0, 16.0])
        self.assertEqual(round_to_float(torch.tensor([0.3, 1e6, 5.0]), E5M2).tolist(), [0.3125, 57344.0, 5.0])

    def test_stochastic_rounding_is_unbiased_and_lands_on_neighbours(self):
        x = torch.full((20000, 32), 0.8)
        x[:, 0] = 4.0  # amax 4 → scale 2^0: 0.8 lies between grid points 0.5 and 1
        out = mxfp4.quantize(x, "stochastic", draws=keyed(x)).values[:, 1:]
        self.assertEqual(set(out.unique().tolist()), {0.5, 1.0})
        self.assertAlmostEqual(out.mean().item(), 0.8, delta=0.01)

    def test_prescale_keeps_stochastic_rounding_from_saturating(self):
        x = torch.linspace(-7.9, 7.9, 32).repeat(1000, 1)
        plain = mxfp4.quantize(x, "stochastic", draws=keyed(x))
        prescaled = mxfp4.quantize(x, "stochastic", sr_prescale=True, draws=keyed(x))
        self.assertGreater(int((plain.grid > 6).sum()), 0)
        self.assertEqual(int((prescaled.grid > 6).sum()), 0)
        self.assertAlmostEqual(prescaled.values.mean(0)[-1].item(), 7.9, delta=0.05)


class EmulatedLinear(unittest.TestCase):
    def run_layer(self, gemm, bias=True):
        torch.manual_seed(3)
        layer = torch.nn.Linear(64, 48, bias=bias)
        reference = torch.nn.Linear(64, 48, bias=bias)
        reference.load_state_dict(layer.state_dict())
        emulate(layer, default_gemms(gemm))
        x = torch.randn(4, 16, 64, requires_grad=True)
        dy = torch.randn(4, 16, 48)
        y = layer(x)
        y.backward(dy)
        return layer, reference, x, dy, y

    def test_fp32_matches_nn_linear(self):
        layer, reference, x, dy, y = self.run_layer(gemm_config("fp32"))
        x_ref = x.detach().clone().requires_grad_(True)
        y_ref = reference(x_ref)
        y_ref.backward(dy)
        torch.testing.assert_close(y, y_ref)
        torch.testing.assert_close(x.grad, x_ref.grad)
        torch.testing.assert_close(layer.weight.grad, reference.weight.grad)
        torch.testing.assert_close(layer.bias.grad, reference.bias.grad)

    def test_each_gemm_is_the_product_of_its_quantized_operands(self):
        for rotation in ("none", "hadamard"):
            with self.subTest(rotation=rotation):
                layer, _, x, dy, y = self.run_layer(gemm_config("mxfp4", rotation, 16), bias=False)
                w = layer.weight.detach()
                x2, dy2 = x.detach().reshape(-1, 64), dy.reshape(-1, 48)

                def r(n):
                    return make_rotation(rotation, 16, n, torch.device("cpu"))
                torch.testing.assert_close(y.detach().reshape(-1, 48), q(x2, r(64)) @ q(w, r(64)).t(), rtol=1e-6, atol=1e-6)
                torch.testing.assert_close(x.grad.reshape(-1, 64), q(dy2, r(48)) @ q(w.t(), r(48)).t(), rtol=1e-6, atol=1e-6)
                torch.testing.assert_close(layer.weight.grad, q(dy2.t(), r(64)) @ q(x2.t(), r(64)).t(), rtol=1e-6, atol=1e-6)
                exact = dy2.t() @ x2
                rel = ((layer.weight.grad - exact).norm() / exact.norm()).item()
                self.assertGreater(rel, 0.01)  # it really quantized
                self.assertLess(rel, 0.5)

    def test_its_output_can_be_changed_in_place(self):
        # transformers' RoCBert and Llama 4 add to a projection's output in place: autograd refuses
        # that on a view made inside a custom Function, so the output must not be one.
        for bias, shape in ((True, (4, 16, 64)), (False, (4, 16, 64)), (False, (16, 64))):
            with self.subTest(bias=bias, shape=shape):
                torch.manual_seed(0)
                layer = torch.nn.Linear(64, 48, bias=bias)
                reference = torch.nn.Linear(64, 48, bias=bias)
                reference.load_state_dict(layer.state_dict())
                emulate(layer, default_gemms(gemm_config("fp32")))
                x = torch.randn(*shape, requires_grad=True)
                x_ref = x.detach().clone().requires_grad_(True)
                residual = torch.randn(*shape[:-1], 48)
                y = layer(x)
                y += residual
                y.mul_(2).sum().backward()
                y_ref = reference(x_ref)
                y_ref += residual
                y_ref.mul_(2).sum().backward()
                torch.testing.assert_close(y, y_ref)
                torch.testing.assert_close(x.grad, x_ref.grad)
                torch.testing.assert_close(layer.weight.grad, reference.weight.grad)

    def test_random_hadamard_draws_signs_per_operand_and_keeps_the_product(self):
        torch.manual_seed(0)
        layer = torch.nn.Linear(64, 32, bias=False)
        emulate(layer, default_gemms(gemm_config("mxfp4", "random-hadamard", 32)))
        x = torch.randn(16, 64)
        other = x.clone()
        other[15, 60] += 1.0  # one element of the key's sample (rows 0, 1, ... 15; columns 0, 4, ... 60)
        first, again, second = layer(x).detach(), layer(x).detach(), layer(other).detach()
        self.assertTrue(torch.equal(first, again), "the same call on the same operands draws the same signs")
        self.assertFalse(torch.equal(first[:15], second[:15]), "another operand draws other signs (rows 0-14 are the same input)")
        for y, inputs in ((first, x), (second, other)):
            exact = inputs @ layer.weight.detach().t()
            self.assertLess(((y - exact).norm() / exact.norm()).item(), 0.3)


if __name__ == "__main__":
    unittest.main()


class LinearWithItsOwnForward(unittest.TestCase):
    """An nn.Linear subclass whose forward is more than the GEMM (Phi-MoE's router returns a tuple)."""

    class Router(torch.nn.Linear):
        def forward(self, x):
            logits = super().forward(x)
            return logits, logits.softmax(-1), logits.argmax(-1)

    def test_observed_not_emulated(self):
        from tests.helpers import bridge_for, read_log
        import tempfile
        model = torch.nn.ModuleDict({"router": self.Router(64, 4), "up": torch.nn.Linear(64, 64)})
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-router-"), stats_every=1, emulate=True)
        self.addCleanup(bridge.close)
        bridge.start_run()
        bridge.begin_step(0)
        x = torch.randn(8, 64)
        logits, probs, choice = model["router"](x)
        (model["up"](x).sum() + logits.sum()).backward()
        bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        self.assertEqual(choice.shape, (8,), "the router's own forward ran")
        self.assertIsNone(getattr(model["router"], "_mxscope_emulation", None))
        self.assertIsNotNone(getattr(model["up"], "_mxscope_emulation", None))
        records = {(r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}
        self.assertTrue(records[("router", "fprop")].get("simulated"), "observed: its stats simulate MXFP4")
        self.assertNotIn("simulated", records[("up", "fprop")])

"""Random bits keyed to the GEMM call (draws.py): a checkpoint's recompute draws the forward pass's bits."""
import contextlib
import unittest

import torch
from torch.utils.checkpoint import checkpoint

from mxscope_bridge import default_gemms, emulate, gemm_config, mxfp4
from mxscope_bridge.draws import SALT_A, SALT_B, Draws, RandomSource, operand_key

RANDOM_RECIPE = gemm_config("mxfp4", "random-hadamard", 32, "stochastic", True)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        return x + self.down(self.dropout(torch.nn.functional.gelu(self.up(x))))


class Net(torch.nn.Module):
    def __init__(self, checkpointing=None):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.checkpointing = checkpointing

    def forward(self, x):
        for block in self.blocks:
            if self.checkpointing is None:
                x = block(x)
            else:
                x = checkpoint(block, x, use_reentrant=self.checkpointing == "reentrant")
        return x


def gradients(checkpointing, micro_batches=2, device="cpu"):
    torch.manual_seed(0)
    model = Net(checkpointing).to(device)
    emulate(model, default_gemms(RANDOM_RECIPE))
    for _ in range(micro_batches):
        x = torch.randn(4, 16, 64, device=device, requires_grad=checkpointing == "reentrant")
        with torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else contextlib.nullcontext():
            loss = model(x).float().pow(2).mean()
        loss.backward()
    return [p.grad.clone() for p in model.parameters()]


class CheckpointRecompute(unittest.TestCase):
    def test_a_recomputed_forward_draws_the_forward_pass_bits(self):
        # Random signs and stochastic rounding on all three GEMMs, dropout in the checkpointed blocks
        # (rewound by torch.utils.checkpoint), two micro-batches: the gradients with checkpointing are
        # those without it, bit for bit. With draws from a generator of our own, the recompute drew anew.
        self.check_checkpointing("cpu")

    @unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")
    def test_on_cuda_under_bf16_autocast(self):
        self.check_checkpointing("cuda")  # the key, sign and quantizing kernels

    def check_checkpointing(self, device):
        plain = gradients(None, device=device)
        for checkpointing in ("reentrant", "non-reentrant"):
            with_checkpoints = gradients(checkpointing, device=device)
            for index, (want, got) in enumerate(zip(plain, with_checkpoints)):
                self.assertTrue(torch.equal(want, got), f"{device} {checkpointing}: parameter {index} differs by {(want - got).abs().max().item()}")

    def test_the_recipe_still_quantizes_randomly(self):
        first, second = gradients(None, 1), gradients(None, 1)
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(first, second)), "same seed, same data: same bits")
        torch.manual_seed(0)
        model = Net()
        x = torch.randn(4, 16, 64)
        model.eval()  # no dropout: the only noise is the quantization's
        emulate(model, default_gemms(RANDOM_RECIPE))
        y1 = model(x)
        y2 = model(x + 0)  # the same values: the same bits
        y3 = model(x * (1 + 2 ** -20))  # other values: other signs and uniforms
        self.assertTrue(torch.equal(y1, y2))
        self.assertFalse(torch.equal(y1, y3))


class Keys(unittest.TestCase):
    def test_a_key_follows_the_seed_the_name_and_the_sampled_values(self):
        torch.manual_seed(1)
        a, b = torch.randn(40, 96), torch.randn(24, 96)
        key = operand_key(7, "l fprop", a, b)
        self.assertTrue(torch.equal(key, operand_key(7, "l fprop", a.clone(), b.clone())))
        self.assertTrue(torch.equal(operand_key(7, "l fprop", a.t().contiguous().t(), b), key), "a strided view: the same key")
        changed = a.clone()
        changed[39, 90] += 1  # sampled rows: 0, 2, 5, 7, ... 35, 37 (sample_positions(40)); columns 0, 6, ... 90
        self.assertTrue(torch.equal(operand_key(7, "l fprop", changed, b), key), "an element outside the sample")
        changed[37, 90] -= 1  # sampled
        for other in (operand_key(8, "l fprop", a, b), operand_key(7, "l dgrad", a, b), operand_key(7, "l fprop", changed, b),
                      operand_key(7, "l fprop", a, b * 2), operand_key(7, "l fprop", a), operand_key(7, "l fprop", a[:, :95], b[:, :95])):
            self.assertFalse(torch.equal(other, key))
        self.assertEqual(operand_key(7, "e", torch.zeros(0, 32)).shape, (2,), "an empty operand has a key too")

    def test_uniforms_are_uniform_and_operands_get_their_own(self):
        draws = Draws(0, operand_key(0, "t", torch.randn(8, 8)))
        u = draws.uniforms(1 << 18, 256, "cpu")
        self.assertEqual(u.dtype, torch.float32)
        self.assertGreaterEqual(u.min().item(), 0.0)
        self.assertLess(u.max().item(), 1.0)
        self.assertAlmostEqual(u.mean().item(), 0.5, delta=0.003)
        counts = torch.histc(u, bins=16, min=0, max=1)
        self.assertLess(((counts - counts.mean()).abs() / counts.mean()).max().item(), 0.03)
        self.assertLess(abs(torch.corrcoef(torch.stack([u[:-1], u[1:]]))[0, 1].item()), 0.01, "neighbours are uncorrelated")
        other = draws.for_operand(SALT_B).uniforms(1 << 18, 256, "cpu")
        self.assertLess(abs(torch.corrcoef(torch.stack([u, other]))[0, 1].item()), 0.01)
        signs = draws.signs(1 << 16, "cpu")
        self.assertEqual(set(signs.unique().tolist()), {-1.0, 1.0})
        self.assertLess(abs(signs.mean().item()), 0.02)
        self.assertEqual(draws.salt, SALT_A)

    def test_a_row_chunk_gets_the_bits_of_those_rows_of_the_whole(self):
        torch.manual_seed(2)
        x = torch.randn(48, 70)  # K = 70 pads to 96
        draws = RandomSource(3).draws({"rounding": "stochastic"}, "l wgrad", x)
        whole = mxfp4.quantize(x, "stochastic", draws=draws).values
        parts = [mxfp4.quantize(x[row0:row0 + 16], "stochastic", draws=draws.from_row(row0)).values for row0 in (0, 16, 32)]
        self.assertTrue(torch.equal(torch.cat(parts), whole))
        self.assertFalse(torch.equal(parts[1], mxfp4.quantize(x[16:32], "stochastic", draws=draws).values), "the row offset counts")

    def test_drawing_without_a_key_says_what_is_missing(self):
        with self.assertRaisesRegex(ValueError, "stochastic rounding needs the GEMM call's Draws"):
            mxfp4.quantize(torch.randn(2, 32), "stochastic")
        with self.assertRaisesRegex(ValueError, "random Hadamard rotation needs"):
            Draws(0).signs(32, "cpu")
        self.assertIsNone(RandomSource(0).draws({"rounding": "nearest-even", "rotation": "hadamard"}, "t", torch.ones(2, 2)).key,
                          "a deterministic GEMM draws nothing and launches nothing")


if __name__ == "__main__":
    unittest.main()

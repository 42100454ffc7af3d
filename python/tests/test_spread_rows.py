"""spread_rows: each expert's rows moved to where its slot starts, zeros everywhere else, the values
bit for bit; on CUDA the Triton copy gives what the torch path gives."""
import random
import unittest

import torch

from mxscope_bridge.spread_rows import COLUMNS, ROWS, spread_rows


def reference(t: torch.Tensor, counts, starts, rows) -> torch.Tensor:
    out = t.new_zeros(rows, t.shape[1])
    source = 0
    for count, start in zip(counts, starts):
        out[start:start + count] = t[source:source + count]
        source += count
    return out


def case(seed: int, device, dtype=torch.float32):
    generator = random.Random(seed)
    experts = generator.choice([1, 3, 10, 40])
    counts = [generator.choice([0, 1, generator.randint(2, 3 * ROWS)]) for _ in range(experts)]
    starts, at = [], 0
    for count in counts:
        at += generator.randint(0, 5)
        starts.append(at)
        at += count
    rows = at + generator.randint(0, 7)
    n = generator.choice([1, 7, COLUMNS, COLUMNS + 3, 2 * COLUMNS])
    t = torch.randn(sum(counts), n, generator=torch.Generator().manual_seed(seed)).to(dtype).to(device)
    if t.numel():
        t.view(-1)[::5] = -0.0  # signed zeros must come through as they are
    return t, counts, starts, rows


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


class SpreadRows(unittest.TestCase):
    def test_rows_land_at_their_starts_with_zeros_between(self):
        for seed in range(60):
            t, counts, starts, rows = case(seed, "cpu")
            other = t * 2
            spread = spread_rows((t, other), counts, starts, rows)
            self.assertTrue(torch.equal(bits(spread[0]), bits(reference(t, counts, starts, rows))), f"seed {seed}")
            self.assertTrue(torch.equal(bits(spread[1]), bits(reference(other, counts, starts, rows))), f"seed {seed}")

    def test_experts_that_overlap_or_overflow_are_refused(self):
        t = torch.ones(5, 2)
        for starts, rows in (([0, 1], 10), ([0, 8], 10), ([-1, 4], 10)):
            with self.assertRaisesRegex(ValueError, "do not fit"):
                spread_rows([t], [2, 3], starts, rows)


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
class SpreadRowsOnGpu(unittest.TestCase):
    def test_the_triton_copy_gives_the_torch_path_bit_for_bit(self):
        for seed in range(60):
            for dtype in (torch.bfloat16, torch.float32):
                t, counts, starts, rows = case(seed, "cuda", dtype)
                got = spread_rows([t], counts, starts, rows)[0]
                want = reference(t.cpu(), counts, starts, rows)
                self.assertEqual(got.dtype, dtype)
                self.assertTrue(torch.equal(bits(got.cpu()), bits(want)), f"seed {seed} {dtype}")

    def test_a_strided_operand_takes_the_torch_path(self):
        t, counts, starts, rows = case(5, "cuda")
        wide = torch.cat([t, t], dim=1)[:, ::2]  # not contiguous
        self.assertTrue(torch.equal(bits(spread_rows([wide], counts, starts, rows)[0].cpu()), bits(reference(wide.cpu(), counts, starts, rows))))


if __name__ == "__main__":
    unittest.main()

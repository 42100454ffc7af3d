"""Bit-exact agreement with the MXFP4 golden vectors (shared/testdata/mxfp4, or a copy in testdata/mxfp4; `even` = nearest-even)."""
import json
import struct
import unittest
import torch

from mxscope_bridge import mxfp4
from tests.helpers import golden_dir

GOLDEN = golden_dir()


def floats_from_hex(hexes):
    return torch.tensor([struct.unpack(">f", bytes.fromhex(h))[0] for h in hexes], dtype=torch.float32)


def bits(t):
    return t.contiguous().view(torch.int32)


class GoldenVectors(unittest.TestCase):
    def test_golden_directory_is_present(self):
        files = sorted(GOLDEN.glob("*.json"))
        self.assertGreaterEqual(len(files), 12, f"golden vectors missing under {GOLDEN}")

    def test_every_case_bit_exact_in_nearest_even(self):
        checked_blocks = 0
        for path in sorted(GOLDEN.glob("*.json")):
            data = json.loads(path.read_text())
            for case in data["cases"]:
                with self.subTest(file=path.name, case=case["name"]):
                    x = floats_from_hex(case["input_hex"]).reshape(case["shape"])
                    result = case["results"]["even"]
                    exact = not result["exact_agrees"]
                    want_hex = result["exact_output_hex"] if exact else result["output_hex"]
                    want_exp = result["exact_shared_exp"] if exact else result["shared_exp"]
                    q = mxfp4.quantize(x, "nearest-even")
                    got_exp = [None if nan else int(e) for e, nan in zip(q.shared_exp.tolist(), q.nan_block.tolist())]
                    self.assertEqual(got_exp, want_exp)
                    want = floats_from_hex(want_hex)
                    got = q.values.reshape(-1)
                    both_nan = torch.isnan(want) & torch.isnan(got)
                    mismatch = (bits(got) != bits(want)) & ~both_nan
                    if mismatch.any():
                        first = int(mismatch.nonzero()[0])
                        self.fail(f"{int(mismatch.sum())} elements differ; first at {first}: got {got[first]}, want {want[first]}")
                    checked_blocks += case["n_blocks"]
        self.assertGreaterEqual(checked_blocks, 1228)


if __name__ == "__main__":
    unittest.main()

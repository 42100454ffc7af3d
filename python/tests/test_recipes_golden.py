"""Bit-exact agreement of mxscope_bridge.formats with the NVFP4 / MXFP8 / MX-scale-rule golden vectors
(test/mx/recipes-golden, made by its generate.py from the definitions in exact rational arithmetic),
as the TypeScript paths agree with them (test/mx/recipes-golden.test.ts)."""
import json
import struct
import unittest
from pathlib import Path

import torch

from mxscope_bridge import formats, mxfp4

GOLDEN = Path(__file__).resolve().parents[2] / "test" / "mx" / "recipes-golden"


def floats(hexes):
    return torch.tensor([struct.unpack(">f", bytes.fromhex(h))[0] for h in hexes], dtype=torch.float32)


def assert_same_bits(test, got, want_hex, what):
    want = floats(want_hex)
    got = got.reshape(-1)
    both_nan = torch.isnan(want) & torch.isnan(got)
    mismatch = (got.view(torch.int32) != want.view(torch.int32)) & ~both_nan
    if mismatch.any():
        first = int(mismatch.nonzero()[0])
        test.fail(f"{what}: {int(mismatch.sum())} elements differ; first at {first}: got {got[first].item()!r}, want {want[first].item()!r}")


def assert_matches_case(test, q, case):
    """Scales, codes and dequantized values of `q` as the golden case has them."""
    test.assertEqual(q.scales.tolist(), case["scales"])
    test.assertEqual(q.codes.reshape(-1).tolist(), case["codes"])
    assert_same_bits(test, q.values, case["output_hex"], case["name"])


def cases(name):
    return json.loads((GOLDEN / name).read_text())["cases"]


class RecipesGolden(unittest.TestCase):
    def test_mxfp8_every_element_type_and_scale_rule(self):
        seen = set()
        for case in cases("mxfp8.json"):
            with self.subTest(case=case["name"]):
                x = floats(case["input_hex"]).reshape(-1, case["row_length"])
                q = formats.quantize_mxfp8(x, case["format"], case["scale_rule"])
                assert_matches_case(self, q, case)
                seen.add((case["format"], case["scale_rule"]))
        self.assertEqual(len(seen), 6)

    def test_mxfp4_scale_rules(self):
        for case in cases("mxfp4-scale-rules.json"):
            with self.subTest(case=case["name"]):
                x = floats(case["input_hex"]).reshape(-1, case["row_length"])
                q = formats.mxfp4_scale_rule_quantize(x, case["scale_rule"])
                assert_matches_case(self, q, case)
                if case["scale_rule"] == "floor":  # the floor rule is the bridge's existing MXFP4 quantizer
                    assert_same_bits(self, mxfp4.quantize(x).values, case["output_hex"], case["name"] + " (mxfp4.quantize)")

    def test_nvfp4_1d_and_2d(self):
        kinds = set()
        for case in cases("nvfp4.json"):
            with self.subTest(case=case["name"]):
                x = floats(case["input_hex"]).reshape(-1, case["row_length"])
                q = formats.quantize_nvfp4(x, case["tile2d"])
                assert_matches_case(self, q, case)
                assert_same_bits(self, q.amax.reshape(1), [case["amax_hex"]], "amax")
                assert_same_bits(self, q.tensor_scale.reshape(1), [case["tensor_scale_hex"]], "tensor scale")
                kinds.add(case["tile2d"])
        self.assertEqual(kinds, {True, False})

    def test_fixed_signs_are_transformer_engines_for_block_16_and_seeded_otherwise(self):
        te = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]
        self.assertEqual(formats.fixed_signs(16, 32, 1, torch.device("cpu")).tolist(), te + te)
        a = formats.fixed_signs(32, 64, 5, torch.device("cpu"))
        self.assertTrue(torch.equal(a, formats.fixed_signs(32, 64, 5, torch.device("cpu"))))
        self.assertTrue(torch.equal(a[:32], a[32:]))
        self.assertFalse(torch.equal(a, formats.fixed_signs(32, 64, 6, torch.device("cpu"))))
        with self.assertRaisesRegex(ValueError, "not a multiple of the Hadamard block 32"):
            formats.fixed_signs(32, 48, 1, torch.device("cpu"))

    def test_bad_arguments_name_what_to_change(self):
        with self.assertRaisesRegex(ValueError, "scale rule 'ceil' is not one of floor, rceil, even"):
            formats.quantize_mxfp8(torch.ones(32), "e4m3", "ceil")
        with self.assertRaisesRegex(ValueError, "element format 'e3m4'"):
            formats.quantize_mxfp8(torch.ones(32), "e3m4")


if __name__ == "__main__":
    unittest.main()

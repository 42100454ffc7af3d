"""The production recipes in the bridge's emulation: NVFP4 / MXFP8 GEMM precisions, the MX scale
rules and the fixed-sign Hadamard rotation, through precision.quantize_operand, make_rotation and
the config checks the host's next-run changes go through."""
import unittest

import torch

from mxscope_bridge import formats
from mxscope_bridge import messages
from mxscope_bridge.config import ConfigError, check_gemm
from mxscope_bridge.draws import Draws, operand_key
from mxscope_bridge.precision import quantize_operand
from mxscope_bridge.rotation import make_rotation, rotate

CPU = torch.device("cpu")


def gemm(**overrides):
    base = {"precision": "mxfp4", "rotation": "none", "hadamardBlock": 16, "rounding": "nearest-even", "srPrescale": False}
    base.update(overrides)
    return base


class RecipesEmulation(unittest.TestCase):
    def test_each_block_precision_quantizes_to_its_own_format(self):
        torch.manual_seed(0)
        w = torch.randn(32, 64)
        for precision, expected in (
            ("nvfp4", formats.quantize_nvfp4(w).values),
            ("mxfp8", formats.quantize_mxfp8(w, "e4m3").values),
        ):
            got, q = quantize_operand(w, gemm(precision=precision), False, None, None, "w")
            self.assertIsNone(q)
            self.assertTrue(torch.equal(got, expected), precision)
        dy, _ = quantize_operand(w, gemm(precision="mxfp8"), True, None, None, "dy")
        self.assertTrue(torch.equal(dy, formats.quantize_mxfp8(w, "e5m2").values), "gradients are E5M2")
        tiles, _ = quantize_operand(w, gemm(precision="nvfp4", nvfp4Weight2d=True), False, None, None, "w", is_weight=True)
        self.assertTrue(torch.equal(tiles, formats.quantize_nvfp4(w, tile2d=True).values))
        self.assertFalse(torch.equal(tiles, formats.quantize_nvfp4(w).values), "16x16 tiles differ from 1x16 blocks")
        rceil, _ = quantize_operand(w * 7, gemm(scaleRule="rceil"), False, None, None, "x")
        self.assertTrue(torch.equal(rceil, formats.mxfp4_scale_rule_quantize(w * 7, "rceil").values))
        for precision in ("nvfp4", "mxfp8"):
            err = (quantize_operand(w, gemm(precision=precision), False, None, None, "w")[0] - w).norm() / w.norm()
            self.assertLess(err.item(), 0.15 if precision == "nvfp4" else 0.05, precision)

    def test_fixed_sign_rotation_is_the_same_every_call_and_keeps_the_product(self):
        a, b = torch.randn(4, 64, dtype=torch.float64), torch.randn(3, 64, dtype=torch.float64)
        first = make_rotation("fixed-sign-hadamard", 16, 64, CPU, Draws(3))
        second = make_rotation("fixed-sign-hadamard", 16, 64, CPU, Draws(3))
        self.assertTrue(torch.equal(first.signs, second.signs))
        self.assertEqual(first.signs[:16].tolist(), list(formats.TE_WGRAD_SIGNS_16))
        torch.testing.assert_close((rotate(a, first) @ rotate(b, first).t()).double(), a @ b.t(), rtol=1e-5, atol=1e-4)
        random1 = make_rotation("random-hadamard", 16, 64, CPU, Draws(3, operand_key(3, "l fprop", a)))
        random2 = make_rotation("random-hadamard", 16, 64, CPU, Draws(3, operand_key(3, "l fprop", a * 2)))
        self.assertFalse(torch.equal(random1.signs, random2.signs), "random-hadamard draws fresh signs for another operand")

    def test_config_accepts_the_new_fields_and_names_bad_values(self):
        check_gemm(gemm(precision="nvfp4", rotation="fixed-sign-hadamard", nvfp4Weight2d=True), "gemms.wgrad")
        check_gemm(gemm(precision="mxfp8", scaleRule="even"), "gemms.fprop")
        self.assertIsNone(messages.check(messages.next_run_config_schema, {"gemms": {"wgrad": {"scaleRule": "rceil", "rotation": "fixed-sign-hadamard", "precision": "nvfp4"}}}))
        self.assertRegex(messages.check(messages.next_run_config_schema, {"gemms": {"wgrad": {"scaleRule": "up"}}}), r"\.gemms\.wgrad\.scaleRule: expected one of")
        stats = {"operand": "x", "format": "nvfp4", "blockSize": 16, "blocks": 3, "elements": 48, "sqnrDb": 20.0, "saturatedFrac": 0, "flushedFrac": 0,
                 "histogram": {"kind": "e4m3", "minExp": 40, "counts": [1, 2], "nanBlocks": 0}}
        record = {"type": "layerStats", "runId": "r", "step": 0, "layer": "l", "gemm": "fprop", "precision": "nvfp4", "operands": [stats, dict(stats, operand="w", blockSize=256)]}
        self.assertIsNone(messages.check(messages.telemetry_record_schema, record))
        bad = dict(record, operands=[dict(stats, histogram=dict(stats["histogram"], kind="e8m0")), dict(stats, operand="w")])
        self.assertRegex(messages.check(messages.telemetry_record_schema, bad), r"operands\[0\]\.histogram\.kind: expected 'e4m3' for format nvfp4")
        with self.assertRaisesRegex(ConfigError, "scaleRule: expected one of floor, rceil, even, got 'ceil'"):
            check_gemm(gemm(scaleRule="ceil"), "gemms.fprop")
        with self.assertRaisesRegex(ValueError, "implemented with nearest-even rounding only"):
            quantize_operand(torch.ones(32), gemm(scaleRule="even", rounding="stochastic"), False, None, None, "x")


if __name__ == "__main__":
    unittest.main()

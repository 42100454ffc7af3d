"""The bridge reports NVFP4 / MXFP8 (and MXFP4 under rceil / even) layer stats as what they are: the
histogram of the scale codes actually stored (E8M0 exponents, E4M3 codes for NVFP4, once per 16x16
tile), with the record's format, block size and histogram kind; NVFP4's tensor scale is the whole
operand's even where the observed Wgrad path quantizes it in row chunks."""
import tempfile
import unittest
from collections import Counter

import torch

from mxscope_bridge import default_gemms, formats, gemm_config, messages, stats
from mxscope_bridge.capture import StepCapture, observed_wgrad
from mxscope_bridge.precision import quantize_in_format
from mxscope_bridge.draws import RandomSource
from mxscope_bridge.rotation import make_rotation

from .helpers import TinyNet, run_and_read
from .test_recipes_emulation import gemm
from .test_recipes_golden import cases, floats


def record_of(sums, operand="x"):
    return stats.operand_records([operand], stats.operand_vectors([sums]), [(sums.format, sums.block_size)])[0]


def histogram_counts(histogram):
    return {histogram["minExp"] + i: c for i, c in enumerate(histogram["counts"]) if c}


class RecipesStats(unittest.TestCase):
    def test_histograms_count_the_golden_scale_codes_as_stored(self):
        for case in cases("mxfp8.json") + cases("mxfp4-scale-rules.json"):
            with self.subTest(case=case["name"]):
                x = floats(case["input_hex"]).reshape(-1, case["row_length"])
                if "format" in case:
                    q = formats.quantize_mxfp8(x, case["format"], case["scale_rule"], with_stats=True)
                    self.assertEqual(q.sums.format, f"mxfp8-{case['format']}")
                else:
                    q = formats.mxfp4_scale_rule_quantize(x, case["scale_rule"], with_stats=True)
                    self.assertEqual(q.sums.format, "mxfp4")
                record = record_of(q.sums)
                self.assertNotIn("kind", record["histogram"])
                want = Counter(s - 127 for s in case["scales"] if s != 255)
                self.assertEqual(histogram_counts(record["histogram"]), dict(want))
                self.assertEqual(record["histogram"]["nanBlocks"], case["scales"].count(255))
                self.assertEqual((record["blockSize"], record["blocks"]), (32, len(case["scales"])))
        for case in cases("nvfp4.json"):
            with self.subTest(case=case["name"]):
                x = floats(case["input_hex"]).reshape(-1, case["row_length"])
                q = formats.quantize_nvfp4(x, case["tile2d"], with_stats=True)
                record = record_of(q.sums, "w")
                per_row = -(-case["row_length"] // 16)
                # Tiles repeat their code on each of their 16 rows: count each tile once.
                rows = range(0, len(case["scales"]) // per_row, 16 if case["tile2d"] else 1)
                stored = [case["scales"][r * per_row + b] for r in rows for b in range(per_row)]
                self.assertEqual(record["histogram"]["kind"], "e4m3")
                self.assertEqual(record["blockSize"], 256 if case["tile2d"] else 16)
                self.assertEqual(histogram_counts(record["histogram"]), dict(Counter(c for c in stored if c != 0x7F)))
                self.assertEqual(record["histogram"]["nanBlocks"], stored.count(0x7F))
                self.assertEqual(record["blocks"], len(stored))

    def test_saturated_flushed_and_sqnr_are_the_formats_own(self):
        x = torch.tensor([[1e6] + [1.0] * 31, [2.0 ** -20, 3.0] + [0.0] * 30], dtype=torch.float32)
        q = formats.quantize_mxfp8(x, "e4m3", "floor", with_stats=True)
        record = record_of(q.sums)
        out = q.values
        self.assertAlmostEqual(record["flushedFrac"], float(((out == 0) & (x != 0)).sum()) / float((x != 0).sum()))
        # Block 0's scale is 2^11 (amax 1e6): its 1.0s fall below E4M3's smallest subnormal 2^-9 and flush;
        # block 1's is 2^-7 (amax 3): 2^-20 becomes 2^-13 and flushes too.
        self.assertEqual(record["flushedFrac"], 32 / 34)
        expected_sqnr = 10 * torch.log10((x.double() ** 2).sum() / ((x.double() - out.double()) ** 2).sum())
        self.assertAlmostEqual(record["sqnrDb"], expected_sqnr.item(), places=6)  # float32 squares, summed in float64
        big = torch.tensor([[480.0] + [1.0] * 31])  # rceil: 480/448 needs a scale of 2; floor keeps 2^0 and saturates
        self.assertEqual(record_of(formats.quantize_mxfp8(big, "e4m3", "rceil", with_stats=True).sums)["saturatedFrac"], 0.0)
        # floor: shared = 8 − 8 = 0, 480 rounds to 480 > 448 and clamps
        self.assertEqual(record_of(formats.quantize_mxfp8(big, "e4m3", "floor", with_stats=True).sums)["saturatedFrac"], 1 / 32)

    def test_a_chunk_with_the_tensor_amax_quantizes_like_the_whole_tensor(self):
        torch.manual_seed(1)
        x = torch.randn(64, 48)
        x[5, 7] = 40.0  # the tensor's amax lives in the first chunk only
        whole = formats.quantize_nvfp4(x)
        amax = formats.finite_amax(x)
        chunks = [formats.quantize_nvfp4(x[r:r + 16], tensor_amax=amax) for r in range(0, 64, 16)]
        self.assertTrue(torch.equal(torch.cat([c.values for c in chunks]), whole.values))
        self.assertFalse(torch.equal(formats.quantize_nvfp4(x[16:32]).values, whole.values[16:32]), "a chunk's own amax gives other scales")

    def test_observed_wgrad_reports_nvfp4_stats_of_the_whole_operand_across_row_chunks(self):
        torch.manual_seed(2)
        dy, x = torch.randn(64, 48), torch.randn(64, 32)
        dy[3, 40] = 25.0  # amax in the last chunk of ∇Yᵀ's rows
        for precision in ("nvfp4", "mxfp8"):
            g = gemm(precision=precision, rotation="hadamard")
            capture = StepCapture(True, RandomSource(0))
            capture.errors.rows_per_chunk = lambda *shape: 16  # ∇Yᵀ in three row chunks
            observed_wgrad("l", g, dy, x, capture, "bf16")
            _, sums = capture.operands[("l", "wgrad")]
            r = make_rotation("hadamard", 16, 64, dy.device, None)
            _, want_dy = quantize_in_format(dy.t(), g, True, r, "dy", with_stats=True)
            _, want_x = quantize_in_format(x.t(), g, False, r, "x", with_stats=True)
            for name, want in (("dy", want_dy), ("x", want_x)):
                got = sums[name]
                self.assertEqual((got.format, got.block_size), (want.format, want.block_size), f"{precision} {name}")
                self.assertTrue(torch.equal(got.hist.to(torch.float64), want.hist.to(torch.float64)), f"{precision} {name} histogram")
                self.assertTrue(torch.equal(got.counts, want.counts), f"{precision} {name} counts")
                torch.testing.assert_close(got.energies, want.energies, rtol=1e-12, atol=0)
            self.assertEqual(sums["dy"].format, "nvfp4" if precision == "nvfp4" else "mxfp8-e5m2")
            self.assertEqual(sums["x"].format, "nvfp4" if precision == "nvfp4" else "mxfp8-e4m3")

    def test_emulated_and_observed_runs_publish_valid_records_in_the_gemms_own_formats(self):
        gemms = default_gemms(gemm_config("nvfp4", "fixed-sign-hadamard", 16))
        gemms["fprop"]["nvfp4Weight2d"] = True
        gemms["dgrad"] = dict(gemm_config("mxfp8", "none", 16), scaleRule="rceil")
        gemms["wgrad"] = dict(gemm_config("mxfp4", "hadamard", 32), scaleRule="even")
        for emulate in (True, False):
            with self.subTest(emulate=emulate), tempfile.TemporaryDirectory() as out:
                _, records, _ = run_and_read(self, TinyNet(), out, 6, gemms=gemms, emulate=emulate)
                layer_stats = [r for r in records if r["type"] == "layerStats"]
                self.assertTrue(layer_stats)
                for record in layer_stats:
                    self.assertIsNone(messages.check(messages.telemetry_record_schema, record), record)
                    self.assertEqual(record.get("simulated", False), not emulate)
                    formats_seen = {o["operand"]: (o["format"], o["blockSize"], o["histogram"].get("kind", "e8m0")) for o in record["operands"]}
                    if record["gemm"] == "fprop":
                        self.assertEqual(formats_seen, {"x": ("nvfp4", 16, "e4m3"), "w": ("nvfp4", 256, "e4m3")})
                    elif record["gemm"] == "dgrad":
                        self.assertEqual(formats_seen, {"dy": ("mxfp8-e5m2", 32, "e8m0"), "w": ("mxfp8-e4m3", 32, "e8m0")})
                    else:
                        self.assertEqual(formats_seen, {"dy": ("mxfp4", 32, "e8m0"), "x": ("mxfp4", 32, "e8m0")})
                    if emulate:
                        self.assertEqual(record["precision"], {"fprop": "nvfp4", "dgrad": "mxfp8", "wgrad": "mxfp4"}[record["gemm"]])


if __name__ == "__main__":
    unittest.main()

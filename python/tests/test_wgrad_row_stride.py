"""The opt-in wgradErrorRowStride (protocol 1.5): each layer's Wgrad error made of every N-th row of ∇W.

The figures of a sampled run are checked against the rows 0, N, 2N, … of the whole ∇Ŵ and ∇W that a
run with every row computes (taken from its WgradErrors as they arrive): the sums scaled to all rows,
the ratios and cosines those of the sampled rows, lag-1 against the step before's sampled rows, the
sketch E at positions that lie in sampled rows. Observed and emulated layers, whole and in row chunks."""
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

from mxscope_bridge import messages, wgrad_error
from mxscope_bridge.config import ConfigError, default_gemms, gemm_config, run_config
from mxscope_bridge.emulate import emulate
from mxscope_bridge.layers import sketch_indices

from tests.helpers import TinyNet, bridge_for, mx_gemms, read_log

STEPS, STATS_EVERY = 6, 3  # stats steps 0 and 3; step 2 keeps E for step 3's lag-1
#: A sampled row's ∇W is its own, smaller GEMM: BLAS rounds it apart from the whole one in the last bits.
REL = 1e-6


def _train(model, bridge, device, micro_batches=1):
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        bridge.begin_step(step)
        x = torch.randn(4, 16, 64, generator=generator).to(device).requires_grad_()
        for part in x.chunk(micro_batches):
            loss = model(part).pow(2).mean()
            loss.backward()
        bridge.end_step(loss=loss.item(), lr=0.01)
        optimizer.step()
        optimizer.zero_grad()


def _run(stride, emulated=False, chunk_bytes=None, capture=False, device="cpu", gemms=None, micro_batches=1):
    """(the run's Wgrad error records by (step, layer), its layer infos by name, with `capture` every
    (step, layer)'s whole ∇Ŵ and ∇W as WgradErrors received them, its config, and the operand stats
    of its Wgrad records by (step, layer))."""
    torch.manual_seed(0)
    model = TinyNet().to(device)
    gemms = gemms or mx_gemms()
    if emulated:
        emulate(model, gemms)
    bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-rowstride-"), gemms=gemms, stats_every=STATS_EVERY, wgrad_error_row_stride=stride,
                        micro_batches=micro_batches)
    products = {}
    add = wgrad_error.WgradErrors.add

    def recording_add(errors, layer, dwq, dw, row0, shape):
        products.setdefault((errors.step, layer), []).append((row0, dwq.cpu(), dw.cpu()))
        return add(errors, layer, dwq, dw, row0, shape)

    patches = ([mock.patch.object(wgrad_error.WgradErrors, "add", recording_add)] if capture else []) + \
              ([mock.patch.object(wgrad_error, "CHUNK_BYTES", chunk_bytes)] if chunk_bytes else [])
    for patch in patches:
        patch.start()
    try:
        bridge.start_run()
        _train(model, bridge, device, micro_batches)
    finally:
        for patch in patches:
            patch.stop()
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    log = read_log(run_dir)
    records = {(r["step"], r["layer"]): r["wgradError"] for r in log if r["type"] == "layerStats" and r["gemm"] == "wgrad"}
    infos = {info["name"]: info for info in log[0]["layers"]}
    whole = {key: (torch.cat([q for _, q, _ in sorted(chunks, key=lambda c: c[0])]), torch.cat([g for _, _, g in sorted(chunks, key=lambda c: c[0])]))
             for key, chunks in products.items()}
    operands = {(r["step"], r["layer"]): r["operands"] for r in log if r["type"] == "layerStats" and r["gemm"] == "wgrad"}
    return records, infos, whole, log[0]["config"], operands


def _gemms(rounding):
    return default_gemms(gemm_config("mxfp4", "hadamard", 32, rounding))


def _without_sqnr(operands):
    return {key: [{k: v for k, v in stats.items() if k != "sqnrDb"} for stats in by_operand] for key, by_operand in operands.items()}


def _sums(a, b):
    return float((a * b).to(torch.float64).sum())


def _expected(whole, step, layer, stride, indices, has_prev):
    """The record a run sampling every stride-th row should give, from the whole ∇Ŵ and ∇W."""
    dwq, dw = whole[(step, layer)]
    err = dwq - dw
    e, g = err[::stride], dw[::stride]
    scale = dw.shape[0] / e.shape[0]
    gg, ee, eg = scale * _sums(g, g), scale * _sums(e, e), scale * _sums(e, g)
    want = {"gradNorm": math.sqrt(gg), "errNorm": math.sqrt(ee), "relErr": math.sqrt(ee / gg), "cosErrGrad": eg / math.sqrt(ee * gg),
            "sketch": err.reshape(-1)[indices].tolist()}
    if has_prev:
        pq, pg = whole[(step - 1, layer)]
        p = (pq - pg)[::stride]
        want["lag1Cos"] = _sums(e, p) / math.sqrt(_sums(e, e) * _sums(p, p))
        want["sketchPrev"] = (pq - pg).reshape(-1)[indices].tolist()
    return want


class RowSampledWgradError(unittest.TestCase):
    DEVICE = "cpu"

    @classmethod
    def setUpClass(cls):
        cls.reference = {}

    def _reference(self, emulated, rounding):
        key = (emulated, rounding)
        if key not in self.reference:
            self.reference[key] = _run(1, emulated, capture=True, device=self.DEVICE, gemms=_gemms(rounding))
        return self.reference[key]

    def check_sampled(self, stride, emulated=False, chunk_bytes=None, rounding="nearest-even"):
        records, infos, _, config, operands = _run(stride, emulated, chunk_bytes, device=self.DEVICE, gemms=_gemms(rounding))
        self.assertEqual(config["wgradErrorRowStride"], stride, "runStarted's config names the estimate")
        _, _, whole, _, exact_operands = self._reference(emulated, rounding)
        if chunk_bytes is None:  # row chunks add ∇Yᵀ's energies in another order: the last bits of SQNR move
            # So do a GPU's atomic float64 sums, run to run: SQNR to 1e-12, every other field exactly.
            self.assertEqual(_without_sqnr(operands), _without_sqnr(exact_operands), "the Wgrad operand stats are the whole operands' whatever the stride")
            for key, stats in operands.items():
                for got, want in zip(stats, exact_operands[key]):
                    self.assertTrue(math.isclose(got["sqnrDb"], want["sqnrDb"], rel_tol=1e-12), (key, got["operand"], got["sqnrDb"], want["sqnrDb"]))
        self.assertEqual(sorted(records), sorted(key for key in whole if key[0] % STATS_EVERY == 0), "every layer reports at every stats step")
        for (step, layer), got in records.items():
            info = infos[layer]
            indices = info["sketchIndices"]
            self.assertTrue(indices and all((i // info["inFeatures"]) % stride == 0 for i in indices), f"{layer}: sketch positions in sampled rows")
            has_prev = step > 0
            want = _expected(whole, step, layer, stride, indices, has_prev)
            self.assertEqual(got["lag1Cos"] is None, not has_prev, (step, layer))
            for field, value in want.items():
                if field.startswith("sketch"):
                    scale = max(map(abs, value), default=0.0)
                    self.assertTrue(all(math.isclose(u, v, rel_tol=1e-5, abs_tol=1e-5 * scale) for u, v in zip(got[field], value)) and len(got[field]) == len(value),
                                    f"{step} {layer} {field}: {got[field]} vs {value}")
                else:
                    self.assertTrue(math.isclose(got[field], value, rel_tol=REL, abs_tol=REL if field.endswith("Cos") or field == "cosErrGrad" else 0.0),
                                    f"{step} {layer} {field}: {got[field]} vs {value}")

    def test_observed_layers_every_fourth_row(self):
        self.check_sampled(4)

    def test_a_stride_that_divides_no_layer(self):
        self.check_sampled(5)  # 96, 64 and 32 rows: 20, 13 and 7 sampled, the last one short

    def test_a_stride_beyond_every_layer_samples_its_first_row(self):
        self.check_sampled(128)

    def test_row_chunks_and_parts_start_on_sampled_rows(self):
        # 256-byte chunks: E, ∇Ŵ and ∇W of one or two sampled rows at a time, ∇Yᵀ in parts.
        self.check_sampled(4, chunk_bytes=256)
        self.check_sampled(5, chunk_bytes=256)

    def test_emulated_layers(self):
        self.check_sampled(4, emulated=True)

    def test_stochastic_rounding_keeps_the_whole_operands_bits(self):
        # Its uniforms are drawn by position in the whole ∇Yᵀ: sampled rows get the bits they get there.
        self.check_sampled(4, rounding="stochastic")
        self.check_sampled(5, rounding="stochastic", chunk_bytes=256)

    def test_micro_batches_sum_the_sampled_rows_before_the_norms(self):
        # Two micro-batches, each a mean over half the batch, sum to twice the whole batch's gradient
        # (at step 0: the doubled gradient moves the weights apart after it).
        whole = _run(4, device=self.DEVICE)[0]
        split = _run(4, device=self.DEVICE, micro_batches=2)[0]
        self.assertEqual(sorted(split), sorted(whole))
        for key in (key for key in whole if key[0] == 0):
            self.assertTrue(math.isclose(split[key]["gradNorm"], 2 * whole[key]["gradNorm"], rel_tol=1e-4), key)
            self.assertTrue(math.isclose(split[key]["relErr"], whole[key]["relErr"], rel_tol=0.2), key)

    def test_the_sampled_estimate_is_near_the_whole(self):
        # Not a tolerance the code could meet by accident: the exact run's figures, which the sampled
        # ones estimate, differ from them (else sampling would have been a no-op).
        records = _run(4, device=self.DEVICE)[0]
        exact = _run(1, device=self.DEVICE)[0]
        rel = [records[key]["relErr"] / exact[key]["relErr"] for key in exact]
        self.assertTrue(all(0.7 < r < 1.3 for r in rel), rel)
        self.assertTrue(any(abs(r - 1) > 1e-6 for r in rel), "sampled and exact figures are the same")


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU: the fused quantize-and-copy kernel and bf16 products with float32 output")
class RowSampledWgradErrorOnGpu(RowSampledWgradError):
    DEVICE = "cuda"


class AccuracyScript(unittest.TestCase):
    def test_row_stride_accuracy_compares_two_runs_of_one_training(self):
        script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "row_stride_accuracy.py")
        done = subprocess.run([sys.executable, script, "--steps", "12", "--stats-every", "5", "--dim", "64", "--hidden", "128", "--vocab", "256",
                               "--heads", "4", "--kv-heads", "2", "--seq", "32", "--batch", "2", "--no-transformers", "--device", "cpu", "--strides", "4"],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("1 in 4 rows, same losses as every row:", done.stdout)
        ratios = {line.split(":")[0].strip(): line for line in done.stdout.splitlines() if "min " in line}
        self.assertEqual(sorted(ratios), ["gradNorm sampled / exact", "lag1Cos sampled - exact", "relErr sampled / exact"], done.stdout)
        median = float(ratios["relErr sampled / exact"].split("median ")[1].split(",")[0])
        self.assertTrue(0.8 < median < 1.2 and median != 1.0, ratios)


class RowStrideConfig(unittest.TestCase):
    def test_sketch_positions_of_stride_one_are_unchanged(self):
        want = sorted(random.Random("7:blocks.0.up").sample(range(96 * 64), 16))
        self.assertEqual(sketch_indices("blocks.0.up", 96, 64, 16, 7), want)

    def test_sketch_positions_lie_in_sampled_rows(self):
        got = sketch_indices("blocks.0.up", 96, 64, 40, 7, row_stride=5)
        self.assertEqual(got, sorted(set(got)))
        self.assertTrue(all((i // 64) % 5 == 0 and i < 96 * 64 for i in got), got)
        self.assertEqual(len(sketch_indices("tiny", 3, 2, 64, 7, row_stride=4)), 2, "at most the sampled elements")

    def test_sketch_positions_outside_the_sampled_rows_are_named(self):
        errors = wgrad_error.WgradErrors(2, lambda layer: [3, 64 + 5], row_stride=2)  # 64 + 5: row 1 of a 64-column ∇W
        errors.begin(0, with_stats=True, keep=False)
        with self.assertRaisesRegex(ValueError, r"lm_head: sketch index in a row wgradErrorRowStride 2 does not sample"):
            errors.add("lm_head", torch.zeros(2, 64), torch.zeros(2, 64), 0, (2, 64))

    def test_refused_values_name_the_field(self):
        for bad in (0, 1025, 2.5, True, "4"):
            with self.assertRaisesRegex(ConfigError, r"wgradErrorRowStride: expected an integer from 1 to 1024", msg=repr(bad)):
                run_config(wgrad_error_row_stride=bad)
        config = run_config(wgrad_error_row_stride=4)
        self.assertEqual(config["wgradErrorRowStride"], 4)
        self.assertNotIn("wgradErrorRowStride", run_config(), "absent by default (every row)")
        self.assertIsNone(messages.check(messages.run_config_schema, config))
        self.assertRegex(messages.check(messages.run_config_schema, dict(config, wgradErrorRowStride=0)) or "", r"\.wgradErrorRowStride")


if __name__ == "__main__":
    unittest.main()

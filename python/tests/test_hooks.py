"""Observing real modules: every nn.Linear's three GEMMs, stats that match a direct computation,
the Wgrad error with lag-1 correlation, the run log, and hooks and emulation agreeing."""
import gc
import math
import os
import sys
import tempfile
import threading
import unittest
from unittest import mock

import torch

from mxscope_bridge import Bridge, default_gemms, emulate, gemm_config, mxfp4
from mxscope_bridge.rotation import make_rotation, rotate

from tests.helpers import TinyNet, bridge_for, one_stats_step, read_log, run_and_read

LINEARS = ["blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down", "lm_head"]


class Hooks(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-test-")

    def run_model(self, model, steps=11, **kwargs):
        return run_and_read(self, model, self.out, steps, **kwargs)

    def test_every_linear_reports_three_gemms_on_stats_steps(self):
        torch.manual_seed(0)
        _, records, run_dir = self.run_model(TinyNet())
        self.assertEqual(records[0]["type"], "runStarted")
        self.assertEqual(records[0]["logDir"], os.path.abspath(run_dir), "the host reopens the run from here after a reload")
        self.assertEqual([layer["name"] for layer in records[0]["layers"]], LINEARS)
        self.assertEqual([r["step"] for r in records if r["type"] == "step"], list(range(11)))
        self.assertEqual(records[-1]["type"], "runEnded")
        stats = [r for r in records if r["type"] == "layerStats"]
        self.assertEqual(sorted({r["step"] for r in stats}), [0, 5, 10])
        self.assertEqual(len(stats), 3 * 3 * len(LINEARS))
        tokens = 4 * 16
        shapes = {"blocks.0.up": (96, 64), "blocks.0.down": (64, 96), "lm_head": (32, 64)}
        for r in stats:
            ops = {o["operand"]: o for o in r["operands"]}
            self.assertEqual(list(ops), {"fprop": ["x", "w"], "dgrad": ["dy", "w"], "wgrad": ["dy", "x"]}[r["gemm"]])
            for o in r["operands"]:
                self.assertEqual(o["blocks"], sum(o["histogram"]["counts"]) + o["histogram"]["nanBlocks"])
            if r["layer"] in shapes:
                out_f, in_f = shapes[r["layer"]]
                want = {"fprop": {"x": tokens * in_f, "w": out_f * in_f}, "dgrad": {"dy": tokens * out_f, "w": out_f * in_f},
                        "wgrad": {"dy": tokens * out_f, "x": tokens * in_f}}[r["gemm"]]
                self.assertEqual({k: o["elements"] for k, o in ops.items()}, want)
            self.assertEqual("wgradError" in r, r["gemm"] == "wgrad")
        self.assertTrue(os.path.exists(os.path.join(run_dir, "run.json")))
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "checkpoints")))

    def test_wgrad_error_and_lag1(self):
        torch.manual_seed(0)
        _, records, _ = self.run_model(TinyNet())
        wgrad = {r["step"]: r["wgradError"] for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad" and r["layer"] == "lm_head"}
        self.assertIsNone(wgrad[0]["lag1Cos"])
        self.assertIsNone(wgrad[0]["sketchPrev"])
        for step in (5, 10):
            e = wgrad[step]
            self.assertTrue(-1 <= e["lag1Cos"] <= 1)
            self.assertEqual(len(e["sketch"]), 16)
            self.assertEqual(len(e["sketchPrev"]), 16)
            for value in e["sketch"] + e["sketchPrev"]:
                self.assertEqual(value, float(f"{value:.9g}"), "sketch entries travel with at most 9 significant digits")
                self.assertNotEqual(value, 0.0)
            self.assertAlmostEqual(e["relErr"], e["errNorm"] / e["gradNorm"])
            self.assertAlmostEqual(e["gradToErr"], 1 / e["relErr"])
            self.assertTrue(0.01 < e["relErr"] < 1)

    def test_stats_match_a_direct_computation(self):
        torch.manual_seed(0)
        model = TinyNet()
        seen = {}

        def keep_input(module, inputs, output):
            seen.setdefault("x", inputs[0].detach().reshape(-1, 64).clone())
        model.lm_head.register_forward_hook(keep_input)
        _, records, _ = self.run_model(model, steps=1)
        r = next(r for r in records if r["type"] == "layerStats" and r["layer"] == "lm_head" and r["gemm"] == "fprop")
        x_stats = r["operands"][0]
        q = mxfp4.quantize(rotate(seen["x"], make_rotation("hadamard", 32, 64, torch.device("cpu"))))
        exps = q.shared_exp.tolist()
        hist = x_stats["histogram"]
        self.assertEqual(hist["minExp"], min(exps))
        self.assertEqual(hist["counts"], [exps.count(e) for e in range(min(exps), max(exps) + 1)])
        source = rotate(seen["x"], make_rotation("hadamard", 32, 64, torch.device("cpu")))
        noise = ((source - q.values) ** 2).sum().item()
        self.assertAlmostEqual(x_stats["sqnrDb"], 10 * math.log10((source ** 2).sum().item() / noise), places=4)

    def test_non_finite_inputs_still_give_valid_records(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 32))
        bridge = bridge_for(model, self.out)
        self.addCleanup(bridge.close)
        bridge.start_run()
        bridge.begin_step(0)
        x = torch.randn(32, 64)  # 32 tokens: wgrad's reduction dim must fit the Hadamard block
        x[3, 5] = float("nan")
        model(x).sum().backward()
        bridge.end_step(loss=float("nan"))
        run_dir = bridge.run_dir
        bridge.end_run()
        records = read_log(run_dir)
        self.assertIsNone(next(r for r in records if r["type"] == "step")["loss"])
        stats = {r["gemm"]: r for r in records if r["type"] == "layerStats"}
        self.assertEqual(stats["fprop"]["operands"][0]["histogram"]["nanBlocks"], 1)
        self.assertIsNone(stats["fprop"]["operands"][0]["sqnrDb"])
        error = stats["wgrad"]["wgradError"]
        self.assertEqual(error["gradNorm"], sys.float_info.max)
        self.assertTrue(all(math.isfinite(v) for v in error["sketch"]))

    def test_emulated_fp32_gemms_have_no_wgrad_error(self):
        torch.manual_seed(0)
        model = TinyNet()
        emulate(model)
        _, records, _ = self.run_model(model, steps=1, gemms=default_gemms(gemm_config("fp32")))
        wgrad = [r for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad"]
        self.assertEqual(len(wgrad), len(LINEARS))
        for r in wgrad:
            self.assertEqual(r["precision"], "fp32")
            self.assertNotIn("simulated", r, "emulated GEMMs report what they ran")
            self.assertEqual(r["wgradError"]["errNorm"], 0.0)
            self.assertIsNone(r["wgradError"]["gradToErr"])

    def test_observed_gemms_are_labelled_with_what_they_ran_and_simulate_mxfp4(self):
        # An fp32 model observed with an fp32 config: the label says fp32 and the Wgrad error is
        # what MXFP4 with the configured rotation would do (not an all-zero error).
        for declared, want in ((None, "fp32"), ("bf16", "bf16"), ({"wgrad": "mxfp4"}, "mxfp4")):
            torch.manual_seed(0)
            _, records, _ = self.run_model(TinyNet(), steps=1, gemms=default_gemms(gemm_config("fp32", "hadamard", 32)), precision=declared)
            stats = [r for r in records if r["type"] == "layerStats"]
            self.assertEqual(len(stats), 3 * len(LINEARS))
            for r in stats:
                self.assertTrue(r["simulated"])
                self.assertEqual(r["precision"], want if r["gemm"] == "wgrad" or declared != {"wgrad": "mxfp4"} else "fp32", (declared, r["gemm"]))
                if r["gemm"] == "wgrad":
                    self.assertGreater(r["wgradError"]["relErr"], 0.01)

    def test_hooks_and_emulation_report_the_same_stats(self):
        # One layer and a loss linear in its output, so both paths see identical X, W and ∇Y.
        results = []
        for emulated in (False, True):
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(64, 96))
            x, probe = torch.randn(64, 64, requires_grad=True), torch.randn(64, 96)
            records = one_stats_step(self, model, self.out, lambda: (model(x) * probe).sum(), emulated)
            results.append({r["gemm"]: r for r in records})
        hooks, emulation = results
        self.assertEqual(sorted(hooks), ["dgrad", "fprop", "wgrad"])
        for gemm in hooks:
            self.assertEqual(hooks[gemm]["operands"], emulation[gemm]["operands"], gemm)
        self.assertAlmostEqual(hooks["wgrad"]["wgradError"]["errNorm"], emulation["wgrad"]["wgradError"]["errNorm"], places=5)
        self.assertEqual(hooks["wgrad"]["wgradError"]["sketch"], emulation["wgrad"]["wgradError"]["sketch"])

    def test_a_validation_reports_the_tokens_its_step_published(self):
        # A trainer counting its own tokens (padded batches, the Trainer callbacks) passes them to
        # end_step; the validation at that step must sit at the same point of the token axis.
        bridge = bridge_for(TinyNet(), self.out)
        self.addCleanup(bridge.close)
        bridge.start_run()
        for step, tokens in enumerate((1000, 2500)):
            bridge.begin_step(step)
            bridge.end_step(loss=1.0, tokens=tokens)
        bridge.validation(2.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        (validation,) = [r for r in read_log(run_dir) if r["type"] == "validation"]
        self.assertEqual((validation["step"], validation["tokens"]), (1, 2500))

    def test_without_a_server_the_run_log_is_written_off_the_training_thread(self):
        # Writing a step record reads its loss: on the training thread that waits for the GPU at
        # every end_step. The run log's own publisher thread writes it, and end_run waits for it.
        written_on = []
        write = Bridge._write_record

        def spy(bridge, record, line):
            written_on.append(threading.current_thread().name)
            write(bridge, record, line)
        with mock.patch.object(Bridge, "_write_record", spy):
            _, records, _ = run_and_read(self, TinyNet(), self.out, 6, serve=False)
        self.assertEqual(records[-1]["type"], "runEnded", "the log is complete when end_run returns")
        self.assertEqual(len([r for r in records if r["type"] == "layerStats"]), 2 * 3 * len(LINEARS))
        self.assertEqual(set(written_on), {"mxscope-publisher"})
        self.assertEqual(len(written_on), len(records) - 1, "every record but runStarted, which the log's writer opens with")


if __name__ == "__main__":
    unittest.main()


class NothingKeptPastBackward(unittest.TestCase):
    """Once backward has run, the bridge holds none of the step's activations, though autograd's graph
    (with the bridge's gradient hooks on it) lives until the trainer drops its loss, after the
    optimizer step: hooks that kept X until then held 1.4 GiB through a Qwen3-MoE-shaped bench's
    optimizer step (the grouped experts' X)."""

    ROWS = 37  # no parameter has a dimension of 37: a live tensor of 37 rows is an activation

    def activations_alive_after_backward(self, model, forward, width):
        """Activations the bridge keeps after a capture step's backward and the worker's work, graph
        still alive."""
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-kept-"), stats_every=2)
        self.addCleanup(bridge.close)
        bridge.start_run()
        found = []
        for step in range(2):  # a stats step, the step before one
            bridge.begin_step(step)
            x = torch.randn(self.ROWS, width, requires_grad=True)
            y = forward(x)
            loss = y.pow(2).mean()
            loss.backward()
            if bridge.backward_worker is not None:
                bridge.backward_worker.drain()
            found.append(sorted(tuple(t.shape) for t in gc.get_objects() if self.activation_kept(t, x)))
            bridge.end_step(loss=0.0)
            del loss, y
        bridge.end_run()
        return found

    def activation_kept(self, t, x: torch.Tensor) -> bool:
        """Whether t is a detached activation ([ROWS, features]) other than the step's input or its
        gradient (the graph's own tensors, held by the test's output, need a gradient)."""
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[0] != self.ROWS or t.requires_grad:
            return False
        return t.data_ptr() not in (x.data_ptr(), x.grad.data_ptr())

    def test_layers_whose_x_the_hook_keeps(self):
        """GPT-2's Conv1D: no matmul node gives its X, so the hook keeps X for backward's work."""
        from tests.test_transposed_linear import Conv1D
        torch.manual_seed(0)
        model = torch.nn.Sequential(Conv1D(48, 24), torch.nn.GELU(), Conv1D(24, 48))
        self.assertEqual(self.activations_alive_after_backward(model, model, 24), [[], []])

    def test_experts_measured_as_a_group(self):
        from mxscope_bridge.experts import _ExpertCalls, expert_slices
        from tests.test_experts import DIM, EXPERTS, StackedExperts, grouped_mlp
        torch.manual_seed(0)
        model = torch.nn.Module()
        model.experts = StackedExperts()
        experts = model.experts
        offs = torch.tensor([20, self.ROWS] + [self.ROWS] * (EXPERTS - 2), dtype=torch.int32)

        def forward(x):
            calls = _ExpertCalls([s for _, s in expert_slices("experts", experts)])
            return grouped_mlp(calls, x, experts.gate_up_proj.transpose(-2, -1), experts.down_proj.transpose(-2, -1), offs)
        self.assertEqual(self.activations_alive_after_backward(model, forward, DIM), [[], []])


class NoReferenceCycles(unittest.TestCase):
    """A capture step leaves nothing for the garbage collector: a gradient hook registered on the
    output of the very matmul node it reads X from made a cycle (node → hook → node) that kept the
    step's tensors alive until a collection, and a collection during a step could drop hooks of the
    step's layers (their records went missing)."""

    def unreachable_after_each_step(self, model, batch):
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-cycles-"), stats_every=2)
        self.addCleanup(bridge.close)
        bridge.start_run()
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)
        found = []
        try:
            for step in range(3):  # a stats step, the step before one, a stats step with lag-1
                bridge.begin_step(step)
                model(batch()).pow(2).mean().backward()
                bridge.end_step(loss=0.0)
                found.append(gc.collect())
        finally:
            gc.enable()
        bridge.end_run()
        return found

    def test_linear_layers_on_2d_inputs(self):
        """nn.Linear on [tokens, features] (a MoE router, a flattened batch): its output's grad_fn is the matmul node itself."""
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 96, bias=False), torch.nn.GELU(), torch.nn.Linear(96, 64))
        self.assertEqual(self.unreachable_after_each_step(model, lambda: torch.randn(32, 64)), [0, 0, 0])

    def test_experts_expert_by_expert(self):
        from tests.test_experts import DIM, Moe, StackedExperts
        torch.manual_seed(0)
        self.assertEqual(self.unreachable_after_each_step(Moe(StackedExperts()), lambda: torch.randn(4, 16, DIM)), [0, 0, 0])

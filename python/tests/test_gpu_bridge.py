"""GPU: the bridge observing under bf16 autocast reports the same stats through the Triton kernels as
through the torch path, and the same with activation checkpointing (reentrant or not) as without.
Skipped where CUDA or Triton is missing (CI)."""
import math
import tempfile
import threading
import time
import unittest
from unittest import mock

import torch
import torch.utils.checkpoint

from mxscope_bridge import capture as capture_module, mxfp4_triton, observe, wgrad_error

from tests.helpers import TinyNet, bridge_for, mx_gemms, read_log

CUDA = torch.cuda.is_available() and mxfp4_triton.triton is not None


class Checkpointed(torch.nn.Module):
    def __init__(self, net: TinyNet, reentrant: bool):
        super().__init__()
        self.net, self.reentrant = net, reentrant

    def forward(self, x):
        for block in self.net.blocks:
            x = x + torch.utils.checkpoint.checkpoint(lambda h, b=block: b["down"](torch.nn.functional.gelu(b["up"](h))), x, use_reentrant=self.reentrant)
        return self.net.lm_head(x)


def scribble():
    """Tensors of the sizes backward frees (TinyNet's activations and gradients), filled with NaN on
    the trainer's stream: memory the allocator handed back too early would now hold NaN."""
    return [torch.full((n,), float("nan"), device="cuda") for n in (4 * 64 * 64, 4 * 64 * 96, 4 * 64 * 32) * 64]


def run(model, observed, out_dir, steps=6, inline=False, autocast=True, update_before_end_step=False, **kwargs):
    """A short run's layerStats. inline: the hooks' work runs in the hooks (no backward worker);
    update_before_end_step: the optimizer steps and the trainer fills freed memory with NaN before end_step."""
    if inline:
        kwargs["backward_thread"] = False
    bridge = bridge_for(observed, out_dir, gemms=mx_gemms("hadamard"), stats_every=3, **kwargs)
    bridge.start_run()
    generator = torch.Generator(device="cuda").manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 if update_before_end_step else 0.01)

    def update():
        optimizer.step()
        optimizer.zero_grad()
    for step in range(steps):
        bridge.begin_step(step)
        x = torch.randn(4, 64, 64, device="cuda", generator=generator, requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        if update_before_end_step:
            update()
            nan_filled = scribble()  # alive until end_step: the freed memory stays written over
        bridge.end_step(loss=loss.item())
        if not update_before_end_step:
            update()
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    return [r for r in read_log(run_dir) if r["type"] == "layerStats"]


@unittest.skipUnless(CUDA, "needs CUDA and Triton")
class BridgeOnGpu(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-gpu-")

    def records(self, checkpoint=None, torch_path=False, chunk_bytes=None, slow_worker=False, **run_options):
        torch.manual_seed(0)
        net = TinyNet().cuda()
        model = Checkpointed(net, checkpoint == "reentrant") if checkpoint else net
        patches = []
        if torch_path:
            patches.append(mock.patch.object(mxfp4_triton, "available", lambda _: False))
        if chunk_bytes:
            patches.append(mock.patch.object(wgrad_error, "CHUNK_BYTES", chunk_bytes))
        if slow_worker:  # each layer's telemetry starts 20 ms late: backward and the trainer's next calls run ahead of it
            inner = observe._observe
            patches.append(mock.patch.object(observe, "_observe", lambda *args: (time.sleep(0.02), inner(*args))[1]))
        for p in patches:
            p.start()
        try:
            return run(model, net, self.out, **run_options)
        finally:
            for p in patches:
                p.stop()

    def assert_same_records(self, got, want, label, rel=1e-9, stats_steps=2):
        self.assertEqual(len(got), len(want), label)
        self.assertEqual(len(got), stats_steps * 3 * 5, label)
        for g, w in zip(got, want):
            where = f"{label}: step {g['step']} {g['layer']} {g['gemm']}"
            self.assertEqual((g["step"], g["layer"], g["gemm"]), (w["step"], w["layer"], w["gemm"]))
            for go, wo in zip(g["operands"], w["operands"]):
                for key in ("operand", "blocks", "elements", "histogram"):
                    self.assertEqual(go[key], wo[key], f"{where} {go['operand']} {key}")
                for key in ("saturatedFrac", "flushedFrac", "sqnrDb"):
                    self.assertTrue(math.isclose(go[key], wo[key], rel_tol=rel, abs_tol=1e-12), f"{where} {key} {go[key]} vs {wo[key]}")
            if "wgradError" in w:
                for key in ("gradNorm", "errNorm", "relErr", "cosErrGrad", "lag1Cos"):
                    a, b = g["wgradError"][key], w["wgradError"][key]
                    self.assertEqual(a is None, b is None, f"{where} {key}")
                    if a is not None:
                        self.assertTrue(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9), f"{where} {key} {a} vs {b}")

    def test_triton_and_torch_paths_report_the_same(self):
        self.assert_same_records(self.records(), self.records(torch_path=True), "triton vs torch")

    def test_lag1_is_reported_on_stats_steps_after_a_pre_stats_step(self):
        records = self.records()
        wgrad = [r for r in records if r["gemm"] == "wgrad" and r["step"] == 3]
        self.assertEqual(len(wgrad), 5)
        for r in wgrad:
            self.assertIsNotNone(r["wgradError"]["lag1Cos"], r["layer"])
            self.assertEqual(len(r["wgradError"]["sketchPrev"]), 16)

    def test_row_chunks_report_the_same(self):
        self.assert_same_records(self.records(chunk_bytes=1024), self.records(), "chunked vs whole")

    def test_layers_past_the_lag1_budget_report_no_lag1(self):
        # Pinned buffers within Bridge(lag1_host_bytes), chunk by chunk (copies in flight, E_{t−1}
        # fetched ahead): lm_head's and blocks.1.down's E fit, the other three layers are refused.
        want = self.records(chunk_bytes=1024)
        got = self.records(chunk_bytes=1024, lag1_host_bytes=4 * (32 * 64 + 64 * 96))
        kept = {"lm_head", "blocks.1.down"}
        refused = [r for r in want if r["gemm"] == "wgrad" and r["step"] == 3 and r["layer"] not in kept]
        self.assertEqual(len(refused), 3)
        for record in refused:
            record["wgradError"]["lag1Cos"] = None
        self.assert_same_records(got, want, "within the budget")
        self.assertEqual({r["layer"] for r in got if r["gemm"] == "wgrad" and r["step"] == 3 and r["wgradError"]["lag1Cos"] is not None}, kept)

    def test_the_device_out_of_memory_in_the_bridges_work_drops_that_step_alone(self):
        # A real allocation the device cannot make (64 TiB) in the first Wgrad product of an up
        # projection on the backward worker: step 0's stats are dropped, the run goes on.
        want = self.records()
        product, failed, lines = capture_module.mm_float32, [], []

        def too_large(a, b, exact_in):
            if threading.current_thread().name == "mxscope-backward" and a.shape[0] == 96 and not failed:
                failed.append(a.shape)
                torch.empty(1 << 46, dtype=torch.uint8, device=a.device)
            return product(a, b, exact_in)

        with mock.patch.object(capture_module, "mm_float32", too_large):
            got = self.records(log=lines.append)
        self.assertEqual(len(failed), 1)
        self.assertEqual({r["step"] for r in got}, {3}, "step 0's records dropped, step 3's kept")
        self.assert_same_records(got, [r for r in want if r["step"] == 3], "step 3", stats_steps=1)
        self.assertTrue(any("step 0's layer stats are dropped: the bridge ran out of device memory" in line for line in lines), lines)

    def test_the_worker_reports_what_the_hooks_report_while_the_trainer_reuses_memory(self):
        # The worker launches late while the optimizer updates the weights and the trainer writes NaN
        # over the memory backward freed: it must report what the hooks would have (bf16 autocast, and
        # fp32 weights, whose GEMM saved W itself and whose own GEMMs must not see the bridge's TF32 use).
        for autocast in (True, False):
            want = self.records(inline=True, autocast=autocast, update_before_end_step=True)
            got = self.records(slow_worker=True, autocast=autocast, update_before_end_step=True)
            self.assert_same_records(got, want, f"worker vs hooks, autocast {autocast}")

    def test_checkpointing_reports_each_micro_batch_once(self):
        plain = self.records()
        for mode in ("non-reentrant", "reentrant"):
            self.assert_same_records(self.records(checkpoint=mode), plain, mode)


if __name__ == "__main__":
    unittest.main()

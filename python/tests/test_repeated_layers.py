"""Layers a step does not call exactly once with a fixed number of tokens: a module called twice in
one forward (shared weights), an expert no token is routed to, a repeat only the backward shows (a
reentrant checkpoint), and steps whose tokens differ (padded batches) around a lag-1 pair."""
import math
import tempfile
import unittest
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from mxscope_bridge import wgrad_error

from tests.helpers import bridge_for, read_log


class SharedAndRouted(torch.nn.Module):
    """`shared` is called twice per forward; `experts.1` never gets a token."""

    def __init__(self, dim=64, reentrant_checkpoint=False):
        super().__init__()
        self.shared = torch.nn.Linear(dim, dim)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(dim, dim, bias=False) for _ in range(2))
        self.lm_head = torch.nn.Linear(dim, 32, bias=False)
        self.reentrant_checkpoint = reentrant_checkpoint
        #: calls of `shared` per forward
        self.calls = 2

    def twice(self, h):
        for _ in range(self.calls):
            h = torch.relu(self.shared(h))
        return h

    def forward(self, x):
        h = checkpoint(self.twice, x, use_reentrant=True) if self.reentrant_checkpoint else self.twice(x)
        flat = h.reshape(-1, h.shape[-1])
        routed = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            chosen = torch.arange(flat.shape[0]) if i == 0 else torch.arange(0)
            routed = routed.index_add(0, chosen, expert(flat[chosen]))
        return self.lm_head(routed.reshape(h.shape))


def train(model, seqs, emulate=False, chunk_bytes=None, stats_every=3, calls_from=None):
    """Records by (step, layer, gemm), ‖∇W‖ of `shared` after each backward, and the Wgrad errors'
    host store. `calls_from`: {step: calls of `shared` from that step on}."""
    bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-repeat-"), stats_every=stats_every, emulate=emulate)
    bridge.start_run()
    generator = torch.Generator().manual_seed(1)
    grads = {}
    patch = mock.patch.object(wgrad_error, "CHUNK_BYTES", chunk_bytes) if chunk_bytes else None
    if patch:
        patch.start()
    try:
        for step, seq in enumerate(seqs):
            model.calls = (calls_from or {}).get(step, model.calls)
            bridge.begin_step(step)
            x = torch.randn(4, seq, 64, generator=generator, requires_grad=model.reentrant_checkpoint)
            model(x).pow(2).mean().backward()
            grads[step] = model.shared.weight.grad.norm().item()
            bridge.end_step(loss=0.0)
            model.zero_grad()
    finally:
        if patch:
            patch.stop()
    run_dir, store = bridge.run_dir, bridge._errors.store
    bridge.end_run()
    bridge.close()
    records = {(r["step"], r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}
    return records, grads, store


class RepeatedLayers(unittest.TestCase):
    def test_a_module_called_twice_reports_its_whole_gradient(self):
        # Observing an fp32 model, the exact ∇W is the weight's gradient: the sum over both calls.
        torch.manual_seed(0)
        records, grads, _ = train(SharedAndRouted(), [16] * 7)
        for step in (0, 3, 6):
            error = records[(step, "shared", "wgrad")]["wgradError"]
            self.assertTrue(math.isclose(error["gradNorm"], grads[step], rel_tol=1e-5), (step, error["gradNorm"], grads[step]))
            self.assertGreater(error["errNorm"], 0.0)
            fprop = records[(step, "shared", "fprop")]["operands"][0]
            self.assertEqual(fprop["elements"], 2 * 4 * 16 * 64, "both calls' X")
        self.assertIsNone(records[(0, "shared", "wgrad")]["wgradError"]["lag1Cos"])
        self.assertIsNotNone(records[(3, "shared", "wgrad")]["wgradError"]["lag1Cos"], "E_{t−1} summed over the calls too")

    def test_an_expert_no_token_reaches_reports_empty_operands(self):
        for emulate in (False, True):
            torch.manual_seed(0)
            records, _, _ = train(SharedAndRouted(), [16] * 4, emulate=emulate)
            for gemm in ("fprop", "dgrad", "wgrad"):
                record = records[(3, "experts.1", gemm)]
                tokens_operand = record["operands"][0]
                self.assertEqual((tokens_operand["elements"], tokens_operand["blocks"]), (0, 0), (emulate, gemm))
            self.assertEqual(records[(3, "experts.1", "wgrad")]["wgradError"]["gradNorm"], 0.0)
            self.assertGreater(records[(3, "experts.0", "wgrad")]["operands"][0]["blocks"], 0)
            if emulate:
                self.assertGreater(records[(3, "shared", "wgrad")]["wgradError"]["errNorm"], 0.0, "emulated, the calls' ∇Ŵ sum too")

    def test_a_repeat_inside_a_reentrant_checkpoint(self):
        # A reentrant checkpoint runs the forward without autograd and the calls again inside
        # backward. With torch 2 the second call's Wgrad is the first sign of the repeat (that step
        # has no Wgrad error for the layer); torch 1.13 cannot tell a recompute from a forward and
        # counts the recomputed calls. Either way nothing stops and later steps sum the calls.
        torch.manual_seed(0)
        records, grads, _ = train(SharedAndRouted(reentrant_checkpoint=True), [16] * 7)
        first = records[(0, "shared", "wgrad")].get("wgradError")
        if first is not None:
            self.assertTrue(math.isclose(first["gradNorm"], grads[0], rel_tol=1e-5), (first, grads[0]))
        for step in (3, 6):
            error = records[(step, "shared", "wgrad")]["wgradError"]
            self.assertTrue(math.isclose(error["gradNorm"], grads[step], rel_tol=1e-5), (step, error, grads[step]))
            self.assertIsNotNone(error["lag1Cos"], step)

    def test_a_repeat_found_at_its_second_wgrad(self):
        errors = wgrad_error.WgradErrors(4, lambda layer: [0, 5, 9, 30])
        e = [torch.full((4, 8), float(i)) for i in range(4)]
        errors.begin(2, with_stats=False, keep=True)
        errors.add("a", e[1], e[0], 0, (4, 8))
        errors.add("b", e[1], e[0], 0, (4, 8))
        errors.add("a", e[2], e[0], 0, (4, 8))  # the second call: "a" has no whole E for step 3
        errors.finish_micro_batches()
        errors.finish()
        self.assertEqual(errors.repeated, {"a"})
        errors.begin(3, with_stats=True, keep=False)
        for layer in ("a", "b"):
            self.assertEqual(errors.rows_per_chunk(layer, 4, 8, 10 ** 9), 4 if layer == "a" else 1)
        errors.add("a", e[1], e[0], 0, (4, 8))
        errors.add("a", e[2], e[0], 0, (4, 8))
        errors.add("b", e[3], e[0], 0, (4, 8))
        errors.finish_micro_batches()
        layers, vector = errors.records_vector(["a", "b"])
        self.assertEqual(layers, ["a", "b"])
        self.assertEqual(errors.without_prev, {"a"}, "b's E_{t−1} was stored whole")
        ee = vector.view(2, -1)[:, 1].tolist()  # ‖E‖² over the calls' sum: (1 + 2)² · 32 for a, 3² · 32 for b
        self.assertEqual(ee, [9.0 * 32, 9.0 * 32])

    def test_gradient_accumulation_still_needs_micro_batches(self):
        errors = wgrad_error.WgradErrors(4, lambda layer: [])
        errors.begin(0, with_stats=True, keep=False)
        errors.add("a", torch.ones(2, 2), torch.zeros(2, 2), 0, (2, 2))
        errors.another_forward_pass()
        with self.assertRaisesRegex(RuntimeError, "micro_batches"):
            errors.add("a", torch.ones(2, 2), torch.zeros(2, 2), 0, (2, 2))

    def test_other_tokens_between_the_lag1_pair(self):
        # Row chunks follow the tokens: step 2 (pre-stats) and step 3 (stats) cut E differently.
        seqs = [16, 24, 24, 16, 16, 40, 16]
        torch.manual_seed(0)
        whole, _, _ = train(SharedAndRouted(), seqs)
        torch.manual_seed(0)
        chunked, _, store = train(SharedAndRouted(), seqs, chunk_bytes=8 * 2 * 4 * 24)
        for step in (3, 6):
            for layer in ("experts.0", "lm_head"):
                a, b = chunked[(step, layer, "wgrad")]["wgradError"], whole[(step, layer, "wgrad")]["wgradError"]
                self.assertIsNotNone(a["lag1Cos"], (step, layer))
                self.assertTrue(math.isclose(a["lag1Cos"], b["lag1Cos"], rel_tol=1e-6, abs_tol=1e-6), (step, layer, a["lag1Cos"], b["lag1Cos"]))
                self.assertTrue(all(math.isclose(u, v, rel_tol=1e-6, abs_tol=1e-9) for u, v in zip(a["sketchPrev"], b["sketchPrev"])))
        by_layer = {}
        for layer, row0, row1 in store.host:
            by_layer.setdefault(layer, []).append((row0, row1))
        for layer, rows in by_layer.items():
            rows.sort()
            self.assertTrue(all(a[1] == b[0] for a, b in zip(rows, rows[1:])) and rows[0][0] == 0,
                            f"{layer}: the host keeps one cut of E, not every step's: {rows}")


if __name__ == "__main__":
    unittest.main()

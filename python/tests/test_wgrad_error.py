"""The Wgrad error summed layer by layer (wgrad_error.py) on the CPU: row chunks, micro-batches,
the rotation's fixed arithmetic, and the GPU benchmark script at toy size."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

from mxscope_bridge import wgrad_error
from mxscope_bridge.draws import Draws, operand_key
from mxscope_bridge.rotation import make_rotation, rotate

from tests.helpers import TinyNet, bridge_for, read_log, train

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "bench_bridge.py")


def run(steps=6, micro_batches=1, chunk_bytes=None, **kwargs):
    torch.manual_seed(0)
    model = TinyNet()
    out = tempfile.mkdtemp(prefix="mxscope-wgrad-")
    bridge = bridge_for(model, out, stats_every=3, micro_batches=micro_batches, **kwargs)
    bridge.start_run()
    generator = torch.Generator().manual_seed(0)
    patch = mock.patch.object(wgrad_error, "CHUNK_BYTES", chunk_bytes) if chunk_bytes else None
    if patch:
        patch.start()
    try:
        for step in range(steps):
            bridge.begin_step(step)
            x = torch.randn(4, 16, 64, generator=generator)
            for part in x.chunk(micro_batches):
                model(part).pow(2).mean().backward()
            bridge.end_step(loss=0.0)
            model.zero_grad()
    finally:
        if patch:
            patch.stop()
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    return {(r["step"], r["layer"]): r["wgradError"] for r in read_log(run_dir) if r["type"] == "layerStats" and r["gemm"] == "wgrad"}


#: How far a row-chunked run's figures may be from the whole tensor's: a chunk's ∇W is its own GEMM,
#: which BLAS libraries that block by shape (torch 2.11's on x86) round apart in the last bits.
CHUNKED_REL = 1e-6


class WgradErrors(unittest.TestCase):
    def assert_close_to_whole(self, got, want):
        self.assertEqual(sorted(got), sorted(want))
        for key in want:
            for field in ("gradNorm", "errNorm", "relErr", "cosErrGrad", "alignment", "lag1Cos"):
                a, b = got[key][field], want[key][field]
                self.assertEqual(a is None, b is None, f"{key} {field}")
                if a is not None:
                    # Cosines near 0 are small differences of large sums: held to CHUNKED_REL of their range [-1, 1].
                    bounded = field in ("cosErrGrad", "alignment", "lag1Cos")
                    self.assertTrue(math.isclose(a, b, rel_tol=CHUNKED_REL, abs_tol=CHUNKED_REL if bounded else 1e-12), f"{key} {field}: {a} vs {b}")
            for field in ("sketch", "sketchPrev"):
                a, b = got[key][field], want[key][field]
                self.assertEqual(a is None, b is None, f"{key} {field}")
                if a is not None:
                    scale = max(map(abs, b), default=0.0)
                    self.assertTrue(len(a) == len(b) and all(math.isclose(u, v, rel_tol=CHUNKED_REL, abs_tol=10 * CHUNKED_REL * scale) for u, v in zip(a, b)),
                                    f"{key} {field}: {a} vs {b}")

    def test_row_chunks_give_the_whole_tensor_figures(self):
        whole = run()
        self.assertIsNotNone(whole[(3, "lm_head")]["lag1Cos"], "the stats step after a pre-stats step reports lag-1")
        self.assertIsNone(whole[(0, "lm_head")]["lag1Cos"])
        self.assert_close_to_whole(run(chunk_bytes=256), whole)

    def test_a_closed_bridge_lets_go_of_the_stored_errors(self):
        # E_{t−1} waits in host memory (pinned on a GPU, as large as the weights): a closed bridge
        # that is still referenced (a Trainer callback, a notebook) kept it before.
        import weakref
        torch.manual_seed(0)
        model = TinyNet()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-wgrad-"), stats_every=3)
        bridge.start_run()
        train(model, bridge, 3)  # step 2 stores E for step 3's lag-1
        stored = [weakref.ref(t) for t in bridge._errors.store.host.values()]
        self.assertEqual(len(stored), 5, "one E per layer")
        bridge.end_run()
        self.assertTrue(all(ref() is not None for ref in stored), "kept for the bridge's next run")
        bridge.close()
        self.assertTrue(all(ref() is None for ref in stored), "released when the bridge closes")

    def test_micro_batches_sum_before_the_norms(self):
        # Two micro-batches, each a mean over half the batch, sum to twice the whole batch's mean gradient.
        whole = run()
        split = run(micro_batches=2)
        for key in whole:
            self.assertTrue(math.isclose(split[key]["gradNorm"], 2 * whole[key]["gradNorm"], rel_tol=1e-4), key)

    def test_the_process_wide_tf32_setting_is_never_changed(self):
        # The Wgrad products run on the backward worker's thread while the trainer's own GEMMs run on
        # another: flipping the process-wide setting there changed the precision of those GEMMs.
        with mock.patch.object(torch._C, "_set_cublas_allow_tf32") as setter:
            self.assertTrue(run(steps=3))
        self.assertEqual(setter.call_args_list, [], "the bridge set torch.backends.cuda.matmul.allow_tf32")

    def test_a_second_backward_without_micro_batches_is_named(self):
        with self.assertRaisesRegex(RuntimeError, "micro_batches"):
            self._two_backwards()

    def _two_backwards(self):
        torch.manual_seed(0)
        model = TinyNet()
        bridge = bridge_for(model, tempfile.mkdtemp(), stats_every=3)
        self.addCleanup(bridge.close)
        bridge.start_run()
        bridge.begin_step(0)
        for _ in range(2):
            model(torch.randn(2, 16, 64)).pow(2).mean().backward()


class HostErrorStoreBuffers(unittest.TestCase):
    """E_{t−1}'s host buffers are made once and reused: a buffer no readable chunk holds is a spare,
    handed to the next chunk it fits best whatever its layer (pinned memory is slow to allocate), so
    held memory follows what one step stores; a chunk not stored by the step before is never read."""

    CPU = torch.device("cpu")

    def store(self, store, step_chunks, keep=True):
        for layer, row0, row1 in step_chunks:
            store.put(layer, row0, row1, torch.full((row1 - row0, 4), float(row0 + len(layer))))
        store.end_step(keep=keep)

    def test_a_buffer_a_step_did_not_use_is_reused_by_the_next_that_stores(self):
        store = wgrad_error.HostErrorStore()
        allocated = []
        with mock.patch.object(wgrad_error, "_host_buffer", lambda shape, pinned: allocated.append(shape) or torch.empty(shape)):
            self.store(store, [("a", 0, 8), ("b", 0, 8)])
            self.store(store, [("a", 0, 8)])  # no token reached expert b
            self.assertIsNone(store.get("b", 0, 8, self.CPU), "not readable: the step before did not store b")
            self.assertIsNotNone(store.get("a", 0, 8, self.CPU))
            self.assertEqual(store.spares, 1, "b's buffer kept as a spare")
            self.store(store, [("a", 0, 4), ("a", 4, 8), ("b", 0, 8)])
            self.assertTrue(torch.equal(store.get("b", 0, 8, self.CPU), torch.full((8, 4), 1.0)))
            self.assertTrue(torch.equal(store.get("a", 4, 8, self.CPU), torch.full((4, 4), 5.0)))
        # a's chunks cut otherwise: the first took b's spare; a's old buffer stays readable until the
        # step ends (a chunk cut otherwise may still be read from it), so the rest are new.
        self.assertEqual(allocated, [(32,), (32,), (16,), (32,)])
        self.assertEqual((store.held, store.spares), (4 * 112, 1), "a's old buffer is the next spare")
        self.store(store, [("a", 0, 4), ("a", 4, 8), ("b", 0, 8)])
        self.assertEqual(len(allocated), 4, "the same chunks again: their own buffers")

    def test_layer_groups_hold_one_groups_errors_not_every_layers(self):
        # Each step before a stats step stores one group's layers (here one layer each, of 8, 4 and
        # 2 rows): held memory stays at the largest step's, and every group reads back its own E.
        store = wgrad_error.HostErrorStore()
        groups = [[("g0", 0, 8)], [("g1", 0, 4)], [("g2", 0, 2)], [("g0", 0, 8)]]
        for group in groups:
            self.store(store, group)  # the step before a stats step
            layer, row0, row1 = group[0]
            self.assertTrue(torch.equal(store.get(layer, row0, row1, self.CPU), torch.full((row1 - row0, 4), float(row0 + len(layer)))))
            store.end_step(keep=False)  # the stats step
            self.assertEqual(store.held, 4 * 8 * 4, f"one buffer of g0's size after {layer}")


    def test_a_bridge_with_layer_groups_holds_one_groups_errors(self):
        torch.manual_seed(0)
        model = TinyNet()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-groups-"), stats_every=3, stats_layer_groups=5)
        self.addCleanup(bridge.close)
        bridge.start_run()
        train(model, bridge, 16)  # every group's pre-stats step and stats step, and the first again
        self.assertEqual(bridge._errors.store.held, 4 * 64 * 96, "one buffer, the size of the largest layer's E, not all five layers' (4 × 13,312 floats)")
        bridge.end_run()


class HostErrorStoreBudget(unittest.TestCase):
    """E_{t−1} within a bound on host memory: it is as large as the observed weights in float32
    (pinned on a GPU host, where it cannot be swapped out), 32 GB for an 8 B model; a layer past the
    bound, or whose buffer the host cannot allocate, is refused whole and reports no lag-1."""

    CPU = torch.device("cpu")

    def put_step(self, store, chunks):
        for layer, row0, row1 in chunks:
            store.put(layer, row0, row1, torch.full((row1 - row0, 4), float(row0 + len(layer))))
        store.end_step(keep=True)

    def test_layers_past_the_budget_are_refused_whole_and_never_read(self):
        store = wgrad_error.HostErrorStore(budget=4 * 4 * 12)  # 12 rows of 4 floats
        self.put_step(store, [("a", 0, 8), ("b", 0, 4), ("b", 4, 8), ("c", 0, 4)])
        self.assertEqual(store.take_refused(), ["b"], "b's second chunk would pass the budget: b is refused")
        self.assertEqual(sorted(store.host), [("a", 0, 8), ("c", 0, 4)], "b's first chunk let go; c, stored after, fits")
        self.assertEqual(store.order, [("a", 0, 8), ("c", 0, 4)], "what the next step may read")
        self.assertEqual(store.held, 4 * 4 * 12)
        self.assertIsNone(store.get("b", 0, 4, self.CPU), "no part of b is read")
        self.assertTrue(torch.equal(store.get("a", 0, 8, self.CPU), torch.full((8, 4), 1.0)))
        self.assertIn("past its budget of", store.refusal)
        self.put_step(store, [("a", 0, 8), ("b", 0, 4), ("b", 4, 8), ("c", 0, 4)])
        self.assertEqual(store.take_refused(), [], "said once")
        self.assertEqual(sorted(store.host), [("a", 0, 8), ("c", 0, 4)], "the same layers, in their buffers")
        self.assertIsNone(store.get("b", 4, 8, self.CPU))

    def test_a_layer_refused_within_one_hand_over_keeps_none(self):
        store = wgrad_error.HostErrorStore(budget=4 * 4 * 6)
        store.put_group([("b", 0, 4), ("b", 4, 8)], torch.ones(2, 4, 4))
        store.end_step(keep=True)
        self.assertEqual((store.take_refused(), store.host, store.order), (["b"], {}, []))

    def test_no_budget_keeps_every_layer(self):
        store = wgrad_error.HostErrorStore()
        self.put_step(store, [("a", 0, 8), ("b", 0, 8)])
        self.assertEqual((store.take_refused(), store.held), ([], 2 * 8 * 4 * 4))

    def test_a_buffer_the_host_cannot_allocate_refuses_its_layer_or_raises_for_ranks(self):
        made = []

        def allocate(shape, pinned):
            if made:
                raise RuntimeError("CUDA error: out of memory")
            made.append(shape)
            return torch.empty(shape)

        with mock.patch.object(wgrad_error, "_host_buffer", allocate):
            store = wgrad_error.HostErrorStore(budget=None)
            self.put_step(store, [("a", 0, 8), ("b", 0, 8)])
            self.assertEqual(store.take_refused(), ["b"])
            self.assertIn("could not allocate 0.1 KiB more for its E_{t−1} (CUDA error: out of memory)", store.refusal)
            self.assertIsNotNone(store.get("a", 0, 8, self.CPU))
            made.clear()
            pooled = wgrad_error.HostErrorStore(budget=None, tolerate_failures=False)
            with self.assertRaisesRegex(RuntimeError, r"b: the host could not allocate .* every rank must keep the same layers' E_\{t−1\}.*lag1_host_bytes"):
                self.put_step(pooled, [("a", 0, 8), ("b", 0, 8)])

    def test_the_default_budget_is_half_the_host_shared_by_its_processes(self):
        gib = 2 ** 30
        self.assertEqual(wgrad_error.default_host_budget({}, physical=128 * gib), 64 * gib)
        self.assertEqual(wgrad_error.default_host_budget({"LOCAL_WORLD_SIZE": "8"}, physical=128 * gib), 8 * gib)
        self.assertEqual(wgrad_error.default_host_budget({"LOCAL_WORLD_SIZE": "8"}, physical=128 * gib, limit=32 * gib), 2 * gib, "a container's limit")
        for junk in ("", "0", "-2", "x"):
            self.assertEqual(wgrad_error.default_host_budget({"LOCAL_WORLD_SIZE": junk}, physical=128 * gib), 64 * gib, junk)
        here = wgrad_error.default_host_budget()
        self.assertTrue(here is None or here > 0)

    def test_a_bridge_past_its_budget_names_the_layers_without_lag1(self):
        whole = run()
        lines = []
        # Backward stores lm_head's E (32 × 64 floats) first, then blocks.1.down's (64 × 96): room for those two.
        budget = 4 * (32 * 64 + 64 * 96)
        bounded = run(lag1_host_bytes=budget, log=lines.append)
        kept = {"lm_head", "blocks.1.down"}
        self.assertEqual(sorted(bounded), sorted(whole))
        for (step, layer), error in bounded.items():
            if step == 3 and layer not in kept:
                self.assertEqual((error["lag1Cos"], error["sketchPrev"]), (None, None), layer)
                self.assertEqual({k: v for k, v in error.items() if k not in ("lag1Cos", "sketchPrev")},
                                 {k: v for k, v in whole[(step, layer)].items() if k not in ("lag1Cos", "sketchPrev")}, layer)
            else:
                self.assertEqual(error, whole[(step, layer)], (step, layer))
        self.assertIsNotNone(bounded[(3, "lm_head")]["lag1Cos"])
        named = [line for line in lines if "no lag-1" in line]
        self.assertEqual(len(named), 1, lines)
        self.assertIn("3 layers will report no lag-1 (lag1Cos null) for the rest of this run: blocks.1.up, blocks.0.down, blocks.0.up", named[0])
        self.assertIn("lag1_host_bytes", named[0])
        self.assertIn("past its budget of 32.0 KiB", named[0])

    def test_the_step_before_a_stats_step_measures_only_layers_it_can_keep(self):
        calls = []
        reduce = wgrad_error.WgradErrors._reduce

        def counted(self, layer, *args):
            calls.append((self.step, layer))
            return reduce(self, layer, *args)

        with mock.patch.object(wgrad_error.WgradErrors, "_reduce", counted):
            bounded = run(steps=7, lag1_host_bytes=4 * (32 * 64 + 64 * 96))
        layers = lambda step: sorted(layer for at, layer in calls if at == step)
        self.assertEqual(layers(2), ["blocks.0.down", "blocks.0.up", "blocks.1.down", "blocks.1.up", "lm_head"], "the first tries every layer")
        self.assertEqual(layers(5), ["blocks.1.down", "lm_head"], "later ones, the layers kept")
        self.assertEqual({layer for (step, layer), error in bounded.items() if step == 6 and error["lag1Cos"] is not None}, {"blocks.1.down", "lm_head"})
        whole = run(steps=7)
        # Lag-1 off: the Bridge's budget of 0, or the run config's opt-in (protocol 1.8).
        for off_kwargs in ({"lag1_host_bytes": 0}, {"wgrad_error_lag1": False}):
            calls.clear()
            with mock.patch.object(wgrad_error.WgradErrors, "_reduce", counted):
                off = run(steps=7, **off_kwargs)
            self.assertEqual(sorted({step for step, _ in calls}), [0, 3, 6], f"{off_kwargs}: no step before a stats step measures anything")
            self.assertEqual(sorted(off), sorted(whole))
            for key, error in off.items():
                self.assertEqual((error["lag1Cos"], error["sketchPrev"]), (None, None), key)
                self.assertEqual({k: v for k, v in error.items() if k not in ("lag1Cos", "sketchPrev")},
                                 {k: v for k, v in whole[key].items() if k not in ("lag1Cos", "sketchPrev")}, key)

    def test_lag1_off_is_in_the_run_config_and_checked(self):
        from mxscope_bridge import run_config
        from mxscope_bridge.config import ConfigError
        self.assertNotIn("wgradErrorLag1", run_config())
        self.assertIs(run_config(wgrad_error_lag1=False)["wgradErrorLag1"], False)
        for bad in ("no", 0, None):
            with self.assertRaisesRegex(ConfigError, "wgradErrorLag1: expected true or false"):
                run_config(wgrad_error_lag1=bad)
        torch.manual_seed(0)
        bridge = bridge_for(TinyNet(), tempfile.mkdtemp(prefix="mxscope-lag1-"), wgrad_error_lag1=False)
        self.addCleanup(bridge.close)
        bridge.start_run()
        started = read_log(bridge.run_dir)[0]
        self.assertIs(started["config"]["wgradErrorLag1"], False)
        bridge.end_run()

    def test_the_budget_must_be_bytes(self):
        for bad in (-1, 1.5, "1G"):
            with self.assertRaisesRegex(ValueError, "lag1_host_bytes"):
                bridge_for(TinyNet(), tempfile.mkdtemp(), lag1_host_bytes=bad)


class RotationArithmetic(unittest.TestCase):
    def test_butterflies_equal_the_hadamard_product(self):
        x = torch.randn(7, 256, dtype=torch.float64).float()
        for block in (16, 32, 64, 128):
            r = make_rotation("random-hadamard", block, 256, "cpu", Draws(block, operand_key(block, "t", x)))
            got = rotate(x, r).double()
            want = ((x.double() * r.signs.double()).reshape(7, -1, block) @ r.h.double()).reshape(7, 256)
            self.assertLess((got - want).abs().max().item(), 1e-5 * want.abs().max().item(), block)

    def test_the_same_bits_as_the_typescript_order(self):
        # src/mx/hadamard.ts: multiply by sign·(1/√b as float32), then butterflies with strides 1, 2, 4, ...
        x = torch.randn(3, 32)
        r = make_rotation("hadamard", 32, 32, "cpu")
        norm = torch.tensor(1 / math.sqrt(32), dtype=torch.float32)
        v = (x * norm).tolist()
        for row in v:
            h = 1
            while h < 32:
                for i in range(0, 32, 2 * h):
                    for j in range(i, i + h):
                        a, b = row[j], row[j + h]
                        row[j], row[j + h] = float(torch.tensor(a + b, dtype=torch.float32)), float(torch.tensor(a - b, dtype=torch.float32))
                h *= 2
        self.assertTrue(torch.equal(rotate(x, r), torch.tensor(v, dtype=torch.float32)))


class Benchmark(unittest.TestCase):
    def run_tiny_bench(self, *args: str) -> subprocess.CompletedProcess:
        """bench_bridge.py on the toy model on the CPU, one round at statsEvery 3, with `args`."""
        done = subprocess.run([sys.executable, BENCH, "--tiny", "--no-transformers", "--device", "cpu", "--shapes", "2x32", "--stats-every", "3",
                               "--rounds", "1", *args], capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        return done

    def test_bench_bridge_prints_the_table_with_its_baseline(self):
        out = os.path.join(tempfile.mkdtemp(prefix="mxscope-bench-"), "results.json")
        done = self.run_tiny_bench("--emulated-block", "1", "--emulated", "mxfp4 H32 nearest-even", "--results", out)
        rows = [line for line in done.stdout.splitlines() if line.startswith("| 64 |")]
        # every layer, the opt-in layer groups 4 and the opt-in row stride 4 (measured, derived, two by
        # per-kind medians each), emulated
        self.assertEqual(len(rows), 13, done.stdout)
        self.assertTrue(all("| plain bf16 |" in row or "| plain bf16 median |" in row for row in rows), rows)
        self.assertEqual(sum("per-kind medians" in row for row in rows), 6, rows)
        self.assertEqual(sum("opt-in layer groups 4 (a layer every 4·statsEvery)" in row for row in rows), 4, rows)
        self.assertEqual(sum("opt-in Wgrad error from 1 in 4 rows (an estimate)" in row for row in rows), 4, rows)
        # The step after each stats step (one block of every layer; four with layer groups 4, each group's stats step timed)
        after = [line for line in done.stdout.splitlines() if "the idle step after each stats step" in line]
        self.assertEqual([line.split(": [")[1].split("]")[0].count(",") + 1 for line in after], [1, 4, 1], after)
        with open(out) as f:
            results = json.load(f)
        modes = [(r["mode"], r.get("statsLayerGroups"), r.get("wgradErrorRowStride")) for r in results["runs"]]
        self.assertEqual(modes, [("observe", 1, 1), ("observe", 4, 1), ("observe", 1, 4), ("mxfp4 H32 nearest-even", None, None)])
        self.assertEqual(set(results["runs"][0]["perKindMs"]), {"plain", "off", "pre", "stats"})
        # Each mode's compiles (compile_watch.py; none without Triton), in its results and its output
        self.assertEqual([run["compiles"]["compiles"] for run in results["runs"]], [0, 0, 0, 0])
        self.assertEqual(done.stdout.count("Triton compiles: 0 (0 ms), none in timed steps"), 4, done.stdout)
        for run in results["runs"][:3]:  # the worker's host time and the hooks' wait for it, per capture step
            for field in ("backwardWorkHostMsPerStep", "queueWaitMsPerStep"):
                self.assertEqual(set(run[field]), {"pre", "stats"}, (run["mode"], field))
            self.assertTrue(all(ms > 0 for ms in run["backwardWorkHostMsPerStep"].values()), run["backwardWorkHostMsPerStep"])
            self.assertEqual(set(run["backwardHostMsMedian"]), {"plain", "off", "pre", "stats"}, run["mode"])
        self.assertEqual(sum("waited for room in the worker's queue" in line for line in done.stdout.splitlines()), 3, done.stdout)

    def test_profiled_steps_leave_a_timed_step_of_every_kind(self):
        # --profile-dir profiles (and so does not time) the first step of each kind: with one round that
        # was every capture step, and the table read nan.
        profiles = tempfile.mkdtemp(prefix="mxscope-bench-profile-")
        done = self.run_tiny_bench("--layer-groups", "1", "--row-strides=", "--emulated=", "--profile-dir", profiles)
        rows = [line for line in done.stdout.splitlines() if line.startswith("| 64 |")]
        self.assertEqual(len(rows), 4, done.stdout)
        self.assertFalse(any("nan" in row.lower() for row in rows), rows)
        medians = [line for line in done.stdout.splitlines() if "per-kind median ms" in line]
        self.assertEqual(set(json.loads(medians[0].split("per-kind median ms ")[1])), {"plain", "off", "pre", "stats"}, medians)
        self.assertEqual(sorted(f for f in os.listdir(profiles) if f.startswith("trace-")),
                         [f"trace-2x32-{kind}.json" for kind in ("off", "plain", "pre", "stats")])


if __name__ == "__main__":
    unittest.main()

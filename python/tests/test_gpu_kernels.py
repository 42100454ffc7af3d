"""GPU: the fused Triton and Gluon kernels give the torch path's bits (and the golden vectors'), and the bridge's
GPU paths (observe hooks, checkpointing, emulation) report what the torch path reports. Launches with
stats run on mxfp4_gluon's kernel where it fits; `TritonStatsKernel` runs every check again on mxfp4_triton's own.
Skipped where CUDA or Triton is missing (CI); run on a GPU machine: `python3 -m pytest tests/test_gpu_kernels.py`."""
import json
import os
import struct
import sys
import unittest
from unittest import mock

import torch

from mxscope_bridge import mx_ops, mxfp4, mxfp4_gluon, mxfp4_triton, wgrad_error
from mxscope_bridge.draws import SALT_B, Draws, key_and_signs, operand_key
from mxscope_bridge.rotation import make_rotation

from tests.helpers import golden_dir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from compile_watch import CompileWatch  # noqa: E402

CUDA = torch.cuda.is_available() and mxfp4_triton.triton is not None
# Layer shapes of the 1.1B Llama (tokens × in, out × in) at a few tokens, and odd ones (partial blocks).
SHAPES = [(256, 2048), (2048, 256), (128, 5632), (37, 50), (33, 96), (300, 7)]


def gemm(rotation="none", block=32, rounding="nearest-even", prescale=False):
    return {"precision": "mxfp4", "rotation": rotation, "hadamardBlock": block, "rounding": rounding, "srPrescale": prescale}


def bits(t):
    t = t.float().contiguous()
    return torch.where(torch.isnan(t), torch.full_like(t, float("nan")), t).view(torch.int32)


def torch_path(x, g, r, draws, with_stats=True):
    with mock.patch.object(mxfp4_triton, "available", lambda _: False):
        return mx_ops.quantize_operand(x, g, r, draws, "test", torch.float32, with_stats)


def triton_path(x, g, r, draws, with_stats=True):
    return mx_ops.quantize_operand(x, g, r, draws, "test", torch.float32, with_stats)


def hostile(shape, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=generator) * torch.exp2(torch.randint(-20, 20, (shape[0], 1), generator=generator).float())
    flat = x.view(-1)
    n = flat.numel()
    picks = torch.randint(0, n, (max(1, n // 97),), generator=generator)
    flat[picks[0::5]] = 0.0
    flat[picks[1::5]] = -0.0
    flat[picks[2::5]] = 1e-40  # subnormal
    if n > 64:
        flat[picks[3::11]] = float("nan")
        flat[picks[4::13]] = float("-inf")
    return x


@unittest.skipUnless(CUDA, "needs CUDA and Triton")
class TritonKernels(unittest.TestCase):
    def assert_same(self, got, want, label):
        (gv, gs), (wv, ws) = got, want
        differ = bits(gv) != bits(wv)
        mismatch = differ.sum().item()
        if mismatch:
            at = differ.reshape(-1).nonzero()[0].item()
            row = at // gv.shape[1]
            self.fail(f"{label}: {mismatch} values differ; first at {at}: got {gv.reshape(-1)[at].item()!r}, want {wv.reshape(-1)[at].item()!r}; "
                      f"the row's inputs near it: {self.inputs.reshape(-1)[max(at - 3, row * gv.shape[1]):at + 3].tolist()}")
        if ws is not None:
            self.assertEqual((gs.elements, gs.padded), (ws.elements, ws.padded), label)
            self.assertTrue(torch.equal(gs.counts.cpu(), ws.counts.cpu().double()), f"{label}: counts {gs.counts} vs {ws.counts}")
            self.assertTrue(torch.equal(gs.hist.cpu().double(), ws.hist.cpu().double()), f"{label}: histogram")
            ge, we = gs.energies.cpu(), ws.energies.cpu()
            finite = torch.isfinite(we)
            self.assertTrue(torch.equal(torch.isfinite(ge), finite), label)
            self.assertTrue(torch.allclose(ge[finite], we[finite], rtol=1e-12, atol=0), f"{label}: energies {ge} vs {we}")

    def test_golden_vectors_bit_exact(self):
        golden = golden_dir()
        self.assertTrue(golden.is_dir(), f"golden vectors missing under {golden}")
        blocks = 0
        for path in sorted(golden.glob("*.json")):
            for case in json.loads(path.read_text())["cases"]:
                x = torch.tensor([struct.unpack(">f", bytes.fromhex(h))[0] for h in case["input_hex"]], dtype=torch.float32)
                x = x.reshape(-1, case["shape"][-1]).cuda()
                result = case["results"]["even"]
                exact = not result["exact_agrees"]
                want = torch.tensor([struct.unpack(">f", bytes.fromhex(h))[0] for h in (result["exact_output_hex"] if exact else result["output_hex"])])
                values, _ = triton_path(x, gemm(), None, None, with_stats=False)
                mismatch = (bits(values.cpu().reshape(-1)) != bits(want)).sum().item()
                self.assertEqual(mismatch, 0, f"{path.name} {case['name']}")
                blocks += case["n_blocks"]
        self.assertGreaterEqual(blocks, 1228)

    def test_equal_to_the_torch_path_on_layer_shapes_all_modes(self):
        modes = [gemm(), gemm("hadamard", 16), gemm("hadamard", 32), gemm("hadamard", 128), gemm("random-hadamard", 32),
                 gemm("fixed-sign-hadamard", 16), gemm("fixed-sign-hadamard", 32),
                 gemm("hadamard", 32, "stochastic"), gemm("random-hadamard", 32, "stochastic", True)]
        checked = 0
        for seed, shape in enumerate(SHAPES):
            base = hostile(shape, seed)
            for transposed in (False, True):
                for dtype in (torch.float32, torch.bfloat16) if seed % 2 == 0 else (torch.bfloat16,):
                    x = base.to(dtype).cuda()
                    x = x.t().contiguous().t() if transposed else x  # same values, read along the other axis
                    for g in modes:  # a block that does not divide K: both paths pad with zeros
                        label = f"{shape} transposed={transposed} {dtype} {g}"
                        results = []
                        self.inputs = x
                        draws = Draws(seed, operand_key(seed, "t", x))
                        for path in (torch_path, triton_path):
                            r = make_rotation(g["rotation"], g["hadamardBlock"], shape[1], x.device, draws)
                            results.append(path(x, g, r, draws))
                        self.assert_same(results[1], results[0], label)
                        checked += 1
        self.assertGreater(checked, 80)

    def test_key_and_signs_kernels_equal_the_torch_path(self):
        checked = 0
        for seed, shape in enumerate(SHAPES + [(1, 1), (5000, 3)]):
            base = hostile(shape, seed)
            base[torch.isnan(base)] = 1.0  # NaN has many bit patterns; the key reads bits
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                a = base.to(dtype).cuda()
                for x in (a, a.t(), a[::2] if shape[0] > 1 else a):
                    for b in (None, hostile((7, x.shape[1]), seed + 1).nan_to_num(1.0).cuda()):
                        got = operand_key(seed, "l fprop", x, b)
                        with mock.patch.object(mxfp4_triton, "available", lambda _: False):
                            want = operand_key(seed, "l fprop", x, b)
                        self.assertTrue(torch.equal(got, want), f"{shape} {dtype} {tuple(x.stride())} b={b is not None}: {got} vs {want}")
                        checked += 1
                length = 32 * (seed + 1) + seed + (40000 if seed == 0 else 0)
                key, made = key_and_signs(seed, "l fprop", a, None, length)  # one launch
                with mock.patch.object(mxfp4_triton, "available", lambda _: False):
                    want_key, want = key_and_signs(seed, "l fprop", a, None, length)
                self.assertTrue(torch.equal(key, want_key))
                self.assertTrue(torch.equal(made, want), f"signs made with the key {shape} {dtype}")
        self.assertGreater(checked, 100)

    def test_bf16_output_equals_float32_output(self):
        x = torch.randn(512, 1024, device="cuda")
        r = make_rotation("hadamard", 32, 1024, x.device)
        f32, _ = mx_ops.quantize_operand(x, gemm("hadamard"), r, None, "t", torch.float32)
        b16, _ = mx_ops.quantize_operand(x, gemm("hadamard"), r, None, "t", torch.bfloat16)
        self.assertTrue(torch.equal(f32, b16.float()), "MXFP4 values are exact in bf16")

    def test_the_copy_made_in_the_quantizing_pass_is_the_operand_itself(self):
        # ∇Yᵀ chunks of an observed Wgrad: a transposed view, quantized to contiguous values while the
        # same pass writes its exact contiguous copy (for the exact ∇W), with stats into a shared row.
        # Contiguous values of a transposed view leave the Gluon kernel through a layout of their own
        # (mxfp4_gluon's STORE_ALONG_K): they must equal the values laid out like the view. (Where a
        # rotation's block does not divide the tokens, the view is first padded into a row-major copy.)
        checked = 0
        launched_along_k = []
        gluon_expected = mxfp4_gluon.gluon is not None and mxfp4_gluon.UNUSABLE is None
        if gluon_expected:
            relaunch = mxfp4_gluon._launch_stats

            def recorded(programs, args, constexprs, **options):
                launched_along_k.append(constexprs["STORE_ALONG_K"])
                return relaunch(programs, args, constexprs, **options)
            patcher = mock.patch.object(mxfp4_gluon, "_launch_stats", recorded)
            patcher.start()
            self.addCleanup(patcher.stop)
        for seed, (tokens, out) in enumerate([(256, 2048), (2048, 256), (37, 96), (300, 64)]):
            dy = hostile((tokens, out), seed).to(torch.bfloat16).cuda()
            for g in (gemm(), gemm("none", 32, "stochastic"), gemm("hadamard", 32), gemm("fixed-sign-hadamard", 32),
                      gemm("hadamard", 32, "stochastic")):
                a = dy[:, 8:].t()
                results = []
                for layout in ("like a", "contiguous", "contiguous, with the copy"):
                    draws = Draws(seed, operand_key(seed, "t", dy)).from_row(8)
                    r = make_rotation(g["rotation"], 32, tokens, a.device, draws)
                    row = mx_ops.stats_row(a.device)
                    if layout == "like a":
                        values, sums = mx_ops.quantize_operand(a, g, r, draws, "t", torch.bfloat16, True, row)
                        values = values.contiguous()  # already so where a misfit block padded a into a row-major copy
                    elif layout == "contiguous":
                        values, sums = mx_ops.quantize_operand(a, g, r, draws, "t", torch.bfloat16, True, row, out_row_major=True)
                    else:
                        values, sums, copy = mx_ops.quantize_operand_and_copy(a, g, r, draws, "t", torch.bfloat16, True, row)
                        self.assertTrue(copy.is_contiguous())
                        self.assertTrue(torch.equal(bits(copy), bits(a.contiguous())), f"{g} copy")
                    self.assertTrue(values.is_contiguous())
                    results.append((values, sums))
                self.inputs = a
                self.assert_same(results[1], results[0], f"{(tokens, out)} {g} contiguous values")
                self.assert_same(results[2], results[0], f"{(tokens, out)} {g} contiguous values with the copy")
                checked += 1
        self.assertGreaterEqual(checked, 8)
        if gluon_expected:  # the Gluon kernel made them, through its store layout (not the Triton kernel after a failure)
            self.assertIsNone(mxfp4_gluon.UNUSABLE, "the Gluon kernel gave up: the Triton kernel made every layout")
            self.assertIn(True, launched_along_k, "no launch stored its values along K")

    def test_error_sums_kernel_equals_the_torch_sums(self):
        generator = torch.Generator(device="cuda").manual_seed(3)
        dwq, dw, prev = (torch.randn(1000, 777, device="cuda", generator=generator) for _ in range(3))
        sketch = torch.tensor([0, 5, 777, 1000 * 777 - 1], device="cuda")
        got = torch.zeros(5 + 8, dtype=torch.float64, device="cuda")
        e = wgrad_error.add_error_sums(got, dwq, dw, prev, sketch, 5, 9, write_e=True)
        want = torch.zeros(5 + 8, dtype=torch.float64)
        with mock.patch.object(wgrad_error, "triton", None):
            e_ref = wgrad_error.add_error_sums(want, dwq.cpu(), dw.cpu(), prev.cpu(), sketch.cpu(), 5, 9, write_e=True)
        self.assertTrue(torch.equal(e.cpu(), e_ref))
        self.assertTrue(torch.equal(got[5:].cpu(), want[5:]), "sketches")
        self.assertTrue(torch.allclose(got[:5].cpu(), want[:5], rtol=1e-12), f"{got[:5]} vs {want[:5]}")

    def test_group_error_sums_equal_each_groups_own(self):
        """The experts' launch: each group's vector (with or without E_{t−1}) and e equal the one-layer
        launch's on that group alone, and one launch serves all groups."""
        generator = torch.Generator(device="cuda").manual_seed(4)
        groups, rows, cols = 5, 300, 257
        dwq, dw, prev = (torch.randn(groups, rows, cols, device="cuda", generator=generator) for _ in range(3))
        has_prev = [True, False, True, True, False]
        sketch = torch.stack([torch.randperm(rows * cols, device="cuda", generator=generator)[:6] for _ in range(groups)])
        got = torch.zeros(groups, 5 + 12, dtype=torch.float64, device="cuda")
        launches = []
        launch = wgrad_error._launch_error_sums
        with mock.patch.object(wgrad_error, "_launch_error_sums", lambda *args, **kwargs: launches.append(1) or launch(*args, **kwargs)):
            e = wgrad_error.add_group_error_sums(got, dwq, dw, prev, has_prev, sketch, 5, 11, write_e=True)
        self.assertEqual(len(launches), 1)
        for g in range(groups):
            want = torch.zeros(5 + 12, dtype=torch.float64, device="cuda")
            e_one = wgrad_error.add_error_sums(want, dwq[g], dw[g], prev[g] if has_prev[g] else None, sketch[g], 5, 11, write_e=True)
            self.assertTrue(torch.equal(e[g], e_one), f"group {g}: e")
            self.assertTrue(torch.equal(got[g, 5:], want[5:]), f"group {g}: sketches")
            self.assertTrue(torch.allclose(got[g, :5], want[:5], rtol=1e-12), f"group {g}: {got[g, :5]} vs {want[:5]}")
            if not has_prev[g]:
                self.assertEqual(got[g, 3:5].tolist(), [0.0, 0.0], f"group {g}: no E_(t-1), no pp or ep")


@unittest.skipUnless(CUDA, "needs CUDA and Triton")
class TritonStatsKernel(TritonKernels):
    """Every check above with stats on mxfp4_triton's kernel: Triton without Gluon, Hadamard blocks over 32."""

    def setUp(self):
        patcher = mock.patch.object(mxfp4_gluon, "UNUSABLE", "the tests compare the Triton kernel")
        patcher.start()
        self.addCleanup(patcher.stop)


@unittest.skipUnless(CUDA and mxfp4_gluon.gluon is not None, "needs CUDA and Triton with Gluon")
class GluonStatsLaunches(unittest.TestCase):
    def test_launches_with_stats_and_a_block_of_at_most_32_go_to_the_gluon_kernel(self):
        x = torch.randn(256, 2048, device="cuda", dtype=torch.bfloat16)
        taken = []
        launch = mxfp4_gluon.launch
        with mock.patch.object(mxfp4_gluon, "launch", lambda *args: taken.append(args[2]) or launch(*args)):
            for block in (16, 32, 64, 128):
                r = make_rotation("hadamard", block, 2048, x.device, None)
                mx_ops.quantize_operand(x, gemm("hadamard", block), r, None, "t", torch.bfloat16, with_stats=True)
                mx_ops.quantize_operand(x.t(), gemm("hadamard", block), make_rotation("hadamard", block, 256, x.device, None), None, "t",
                                        torch.bfloat16, with_stats=True)
            mx_ops.quantize_operand(x, gemm("hadamard", 32), make_rotation("hadamard", 32, 2048, x.device, None), None, "t", torch.bfloat16)
        self.assertEqual(taken, [16, 16, 32, 32], "stats launches with blocks of 16 and 32, both orientations; none without stats")

    def test_a_gluon_kernel_that_does_not_compile_hands_every_launch_to_the_triton_kernel(self):
        x = (torch.randn(256, 2048, device="cuda") * torch.exp2(torch.randint(-8, 8, (256, 1), device="cuda").float())).to(torch.bfloat16)
        r = make_rotation("hadamard", 32, 2048, x.device, None)
        with mock.patch.object(mxfp4_gluon, "UNUSABLE", "the tests compare the Triton kernel"):
            want = mx_ops.quantize_operand(x, gemm("hadamard"), r, None, "t", torch.float32, with_stats=True)
        calls = []

        def broken(*args):
            calls.append(1)
            raise RuntimeError("PassManager::run failed")
        with mock.patch.object(mxfp4_gluon, "launch", broken), mock.patch.object(mxfp4_gluon, "UNUSABLE", None):
            with self.assertWarnsRegex(RuntimeWarning, "Gluon stats kernel is not usable here .RuntimeError: PassManager::run failed"):
                got = mx_ops.quantize_operand(x, gemm("hadamard"), r, None, "t", torch.float32, with_stats=True)
            again = mx_ops.quantize_operand(x, gemm("hadamard"), r, None, "t", torch.float32, with_stats=True)
            self.assertEqual(len(calls), 1, "given up after the first failure")
        for (values, sums) in (got, again):
            self.assertTrue(torch.equal(bits(values), bits(want[0])))
            self.assertTrue(torch.equal(sums.counts.cpu(), want[1].counts.cpu()) and torch.equal(sums.hist.cpu(), want[1].hist.cpu()))
            self.assertTrue(torch.allclose(sums.energies.cpu(), want[1].energies.cpu(), rtol=1e-12, atol=0))


@unittest.skipUnless(CUDA and mxfp4_gluon.gluon is not None, "needs CUDA and Triton with Gluon")
class SegmentStats(unittest.TestCase):
    """mx_ops.segment_stats (a grouped call's experts' stats in one launch) gives each operand the
    stats quantize_operand gives it alone: counts and histogram exact, energies to float64 rounding."""

    assert_same = TritonKernels.assert_same

    def assert_each_alone(self, views, g, r, label):
        got = mx_ops.segment_stats(views, g, r)
        self.assertIsNotNone(got, f"{label}: one launch")
        self.assertEqual(len(got), len(views))
        for i, (view, sums) in enumerate(zip(views, got)):
            _, want = mx_ops.quantize_operand(view, g, r, None, "test", None, with_stats=True)
            self.assert_same((torch.zeros(1, 1), sums), (torch.zeros(1, 1), want), f"{label}, operand {i} {tuple(view.shape)}")

    def test_rows_stretches_and_stacked_slices_in_every_layout(self):
        for dtype in (torch.bfloat16, torch.float32):
            rows = hostile((300, 96), 1).to("cuda", dtype)
            stretches = hostile((96, 416), 2).to("cuda", dtype)
            stacked = hostile((4 * 64, 96), 3).to("cuda", dtype).view(4, 64, 96)
            for rotation, block, prescale in (("none", 32, False), ("hadamard", 16, False), ("hadamard", 32, False), ("hadamard", 32, True)):
                g = gemm(rotation, block, prescale=prescale)
                r = make_rotation(rotation, block, 96, torch.device("cuda")) if rotation != "none" else None
                label = f"{dtype} {rotation} {block}{' prescaled' if prescale else ''}"
                self.inputs = rows
                self.assert_each_alone([rows[0:37], rows[37:101], rows[101:300]], g, r, f"{label}, rows")
                self.inputs = stretches
                self.assert_each_alone([stretches[:, 0:64], stretches[:, 64:96], stretches[:, 96:416]], g, r, f"{label}, stretches along K")
                self.inputs = stacked
                self.assert_each_alone([stacked[e] for e in range(4)], g, r, f"{label}, a stacked parameter's slices")
                self.assert_each_alone([stacked[e].t() for e in (2, 0, 3)], g, r, f"{label}, transposed slices, out of order")
        partial = hostile((64, 50), 4).cuda()
        self.inputs = partial
        self.assert_each_alone([partial[:20], partial[20:]], gemm(), None, "a partial last block")

    def test_what_it_leaves_to_one_launch_each(self):
        x = torch.randn(128, 96, device="cuda")
        r = make_rotation("hadamard", 32, 96, x.device)
        cases = {
            "stochastic rounding": ([x[:64], x[64:]], gemm("hadamard", rounding="stochastic")),
            "a K the block does not divide": ([x[:, :48], x[:, 48:]], gemm("hadamard")),
            "two storages": ([x[:64], x[64:].clone()], gemm("hadamard")),
            "two layouts": ([x[:64, :64], x.t()[:64, :64]], gemm("hadamard")),
            "an empty operand": ([x[:64], x[64:64]], gemm("hadamard")),
            "two dtypes": ([x[:64], x[64:].to(torch.bfloat16)], gemm("hadamard")),
        }
        for label, (views, g) in cases.items():
            self.assertIsNone(mx_ops.segment_stats(views, g, r), label)
        self.assertIsNone(mx_ops.segment_stats([x[:64].cpu(), x[64:].cpu()], gemm("hadamard"), None), "on the CPU")
        with mock.patch.object(mxfp4_gluon, "UNUSABLE", "the Triton kernel takes the launches"):
            self.assertIsNone(mx_ops.segment_stats([x[:64], x[64:]], gemm("hadamard"), r), "without the Gluon kernel")


@unittest.skipUnless(CUDA, "needs CUDA and Triton")
class DirectRelaunches(unittest.TestCase):
    """Repeated launches go straight to the compiled launcher (triton_launch.Relauncher) and give the
    torch path's bits, also where a launch differs from the one before only in what Triton specializes
    on (a pointer off 16-byte alignment, an operand of one row)."""

    assert_same = TritonKernels.assert_same

    def test_relaunched_kernels_give_the_torch_paths_bits_whatever_came_before(self):
        base = hostile((257, 2048 + 16), 11).cuda()
        before = (mxfp4_triton._launch_mx.direct_launches, mxfp4_gluon._launch_stats.direct_launches if mxfp4_gluon.gluon else 0)
        for dtype in (torch.bfloat16, torch.float32):
            whole = base.to(dtype)
            views = {"aligned": whole[:256, :2048], "1 element off": whole[:256, 1:2049], "8 elements off": whole[:256, 8:2056],
                     "transposed": whole[:256, :2048].t(), "one row": whole[:1, :2048], "aligned again": whole[:256, :2048]}
            for rotation, block in (("none", 32), ("hadamard", 32), ("hadamard", 64)):
                for rounding in ("nearest-even", "stochastic"):
                    for name, x in views.items():
                        g = gemm(rotation, block, rounding)
                        r = make_rotation(rotation, block, x.shape[1], x.device, None) if rotation != "none" else None
                        for repeat in range(2):
                            label = f"{dtype} {name} {rotation}{block} {rounding} #{repeat}"
                            self.inputs = x
                            draws = Draws(5, operand_key(5, "t", x)).for_operand(SALT_B)
                            want = torch_path(x, g, r, draws)
                            self.assert_same(triton_path(x, g, r, draws), want, label)
                            values, _ = triton_path(x, g, r, draws, with_stats=False)
                            self.assert_same((values, None), (want[0], None), label + " values only")
        after = (mxfp4_triton._launch_mx.direct_launches, mxfp4_gluon._launch_stats.direct_launches if mxfp4_gluon.gluon else 0)
        self.assertGreater(after[0], before[0], "values launches were relaunched")
        if mxfp4_gluon.gluon is not None:
            self.assertGreater(after[1], before[1], "stats launches were relaunched")


@unittest.skipUnless(CUDA, "needs CUDA and Triton")
class CompilesPerShape(unittest.TestCase):
    """A trainer's operands change their row counts from step to step (an expert's tokens, a batch of
    experts' count): once a kernel is compiled for a layer's K, strides and dtypes, other row counts
    compile nothing new. Each compile costs 0.5-1.3 s on the H200 machines, in the middle of a step."""

    def compiles(self, launch_all, counts):
        """What compiled after the first launch: each kernel, the count that caused it, its specialization."""
        launch_all(counts[0])  # whatever the first needs may compile
        compiled = []
        with CompileWatch(lambda: True) as watch:
            for count in counts[1:]:
                launch_all(count)
                compiled += [f"{event.kernel} at {count}: {event.key}" for event in watch.events]
                watch.events.clear()
        return compiled

    def test_other_row_counts_of_an_operand_compile_nothing_new(self):
        x = hostile((320, 256), 21).to("cuda", torch.bfloat16)
        g = gemm("hadamard", 32)
        along_k, transposed = make_rotation("hadamard", 32, 256, x.device, None), make_rotation("hadamard", 32, 320, x.device, None)

        def launch_all(rows):
            # Stats (Gluon's kernel where Triton has Gluon) at any row count; values alone (the Triton
            # kernel, which keeps R specialized: along rows it decides the masked loads' width) at
            # multiples of 16, so only its tile counts vary. A transposed operand is quantized as a
            # Wgrad GEMM's is, row-major values and the exact copy in one pass (values laid out like
            # the transposed view would have a stride that follows the row count: rightly another kernel).
            for with_stats in (True, False) if rows % 16 == 0 else (True,):
                mx_ops.quantize_operand(x[:rows], g, along_k, None, "t", torch.bfloat16, with_stats=with_stats)
                mx_ops.quantize_operand_and_copy(x[:, :rows].t(), g, transposed, None, "t", torch.bfloat16, with_stats=with_stats)
        self.assertEqual(self.compiles(launch_all, [64, 1, 17, 33, 100, 129, 16, 48, 80, 144, 240]), [])

    def test_other_row_counts_on_the_triton_stats_kernel_compile_nothing_new(self):
        x = hostile((320, 256), 22).to("cuda", torch.bfloat16)
        r = make_rotation("hadamard", 32, 256, x.device, None)
        with mock.patch.object(mxfp4_gluon, "UNUSABLE", "the test compiles the Triton kernel"):
            compiled = self.compiles(lambda rows: mx_ops.quantize_operand(x[:rows], gemm("hadamard"), r, None, "t", torch.bfloat16, with_stats=True),
                                     [64, 16, 48, 80, 144, 272])
        self.assertEqual(compiled, [])

    @unittest.skipUnless(mxfp4_gluon.gluon is not None, "needs Triton with Gluon")
    def test_batches_of_other_sizes_compile_nothing_new(self):
        """A grouped call's experts in one stats launch, and a batch's error sums, for batches of other
        sizes: the programs each expert gets (1, 5, 16, 17) and each group gets (1024, 512, 341, 204) vary."""
        x = hostile((2000, 96), 23).cuda()
        r = make_rotation("hadamard", 32, 96, x.device, None)
        generator = torch.Generator(device="cuda").manual_seed(24)
        dwq, dw, prev = (torch.randn(5, 512, 4096, device="cuda", generator=generator) for _ in range(3))
        sketch = torch.stack([torch.randperm(512 * 4096, device="cuda", generator=generator)[:6] for _ in range(5)])
        # Experts' rows: the largest one sets the programs per expert (its blocks / 64).
        batches = {1: [10], 2: [342, 5], 3: [341, 40, 7], 5: [100, 1, 64, 33, 99]}

        def launch_all(experts):
            starts = [sum(batches[experts][:e]) for e in range(experts)]
            views = [x[start:start + rows] for start, rows in zip(starts, batches[experts])]
            self.assertIsNotNone(mx_ops.segment_stats(views, gemm("hadamard"), r))
            vectors = torch.zeros(experts, 5 + 12, dtype=torch.float64, device="cuda")
            wgrad_error.add_group_error_sums(vectors, dwq[:experts], dw[:experts], prev[:experts], [True] * experts, sketch[:experts], 5, 11, write_e=True)
        self.assertEqual(self.compiles(launch_all, [2, 1, 3, 5]), [])


if __name__ == "__main__":
    unittest.main()

"""triton_launch.Relauncher: a kernel compiled for one specialization is launched again directly only
for arguments Triton would give the same specialization; anything else, and launches under Triton's
hooks, go through Triton's own launch. Fakes stand in for Triton (CPU; the GPU check is in test_gpu_kernels)."""
import types
import unittest
from unittest import mock

import torch

from mxscope_bridge import triton_launch


class FakeKernel:
    function, packed_metadata = "function", "metadata"

    def __init__(self, log):
        self.log = log

    def run(self, *launch):
        self.log.append(("direct",) + launch)


class FakeJit:
    """Triton's `fn[grid](*args, **kwargs)`: compiles (here: logs) and returns the compiled kernel;
    the first `failures` launches raise `failure` instead, as a compile that crashed."""

    def __init__(self, failures=0, failure="PassManager::run failed"):
        self.log = []
        self.failures, self.failure = failures, failure

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("triton", grid, args, kwargs))
            if self.failures:
                self.failures -= 1
                raise RuntimeError(self.failure)
            return FakeKernel(self.log)
        return launch


class Relauncher(unittest.TestCase):
    def setUp(self):
        self.hooks = types.SimpleNamespace(launch_enter_hook=types.SimpleNamespace(calls=[]), launch_exit_hook=None)
        active = types.SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda device: 1234)
        for name, value in (("knobs", types.SimpleNamespace(runtime=self.hooks)), ("driver", types.SimpleNamespace(active=active))):
            patcher = mock.patch.object(triton_launch, name, value)
            patcher.start()
            self.addCleanup(patcher.stop)
        self.fn = FakeJit()
        self.launch = triton_launch.Relauncher(self.fn)
        self.x = torch.zeros(64, dtype=torch.float32)

    def kinds(self):
        return [entry[0] for entry in self.fn.log]

    def test_a_second_launch_of_one_specialization_goes_straight_to_the_launcher_with_every_argument_in_order(self):
        self.launch(7, (self.x, 32, 2.5), dict(HB=32, STATS=True), num_warps=2)
        self.launch(9, (self.x, 64, 0.5), dict(HB=32, STATS=True), num_warps=2)
        self.assertEqual(self.kinds(), ["triton", "direct"])
        self.assertEqual(self.fn.log[0][1:], ((7,), (self.x, 32, 2.5), dict(HB=32, STATS=True, num_warps=2)))
        self.assertEqual(self.fn.log[1][1:], (9, 1, 1, 1234, "function", "metadata", None, None, None, self.x, 64, 0.5, 32, True))
        self.assertEqual(self.launch.direct_launches, 1)

    def test_a_compile_that_crashed_in_the_mlir_pipeline_is_tried_once_more_and_its_kernel_kept(self):
        self.fn.failures = 1
        self.launch(7, (self.x, 32, 2.5), dict(HB=32), num_warps=1)
        self.launch(7, (self.x, 32, 2.5), dict(HB=32), num_warps=1)
        self.assertEqual(self.kinds(), ["triton", "triton", "direct"])
        self.assertEqual(self.launch.pipeline_retries, 1)

    def test_a_second_pipeline_crash_and_any_other_compile_error_are_raised(self):
        self.fn.failures = 2
        with self.assertRaisesRegex(RuntimeError, "PassManager::run failed"):
            self.launch(7, (self.x, 32, 2.5), dict(HB=32), num_warps=1)
        self.assertEqual(self.kinds(), ["triton", "triton"])
        other = triton_launch.Relauncher(FakeJit(failures=1, failure="out of resource: shared memory"))
        with self.assertRaisesRegex(RuntimeError, "out of resource"):
            other(7, (self.x, 32, 2.5), dict(HB=32), num_warps=1)
        self.assertEqual(len(other.fn.log), 1, "no second try for an error that is the kernel's")

    def test_what_triton_specializes_on_gets_a_launch_of_its_own(self):
        base = ((self.x, 32, 2.5), dict(HB=32), dict(num_warps=2))
        variants = {
            "a pointer off 16-byte alignment": ((self.x[1:], 32, 2.5), dict(HB=32), dict(num_warps=2)),
            "another dtype": ((self.x.to(torch.bfloat16), 32, 2.5), dict(HB=32), dict(num_warps=2)),
            "an integer equal to 1": ((self.x, 1, 2.5), dict(HB=32), dict(num_warps=2)),
            "an integer not divisible by 16": ((self.x, 33, 2.5), dict(HB=32), dict(num_warps=2)),
            "an integer past 32 bits": ((self.x, 2 ** 36, 2.5), dict(HB=32), dict(num_warps=2)),
            "an integer where a float was": ((self.x, 32, 2), dict(HB=32), dict(num_warps=2)),
            "another constexpr": ((self.x, 32, 2.5), dict(HB=16), dict(num_warps=2)),
            "another option": ((self.x, 32, 2.5), dict(HB=32), dict(num_warps=4)),
        }
        args, constexprs, options = base
        self.launch(1, args, constexprs, **options)
        for what, (args, constexprs, options) in variants.items():
            with self.subTest(what):
                self.fn.log.clear()
                self.launch(1, args, constexprs, **options)
                self.assertEqual(self.kinds(), ["triton"])
                self.launch(1, args, constexprs, **options)
                self.assertEqual(self.kinds(), ["triton", "direct"], "then it is relaunched too")

    def test_launches_under_a_launch_hook_take_tritons_path_so_profilers_see_them(self):
        self.launch(1, (self.x,), {})
        self.hooks.launch_enter_hook.calls.append(print)
        self.launch(1, (self.x,), {})
        self.hooks.launch_enter_hook.calls.clear()
        self.launch(1, (self.x,), {})
        self.assertEqual(self.kinds(), ["triton", "triton", "direct"])

    def test_a_triton_without_knobs_launches_every_time_through_triton(self):
        with mock.patch.object(triton_launch, "driver", None), mock.patch.object(triton_launch, "knobs", None):
            for _ in range(3):
                self.launch(1, (self.x,), dict(HB=32), num_warps=2)
        self.assertEqual(self.kinds(), ["triton"] * 3)


if __name__ == "__main__":
    unittest.main()

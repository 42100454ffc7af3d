"""examples/compile_watch.py: the benchmarks' count of Triton compiles, and of those that fell in
timed steps, through the JIT's cache-miss method (a stand-in Triton: these run on the CPU)."""
import os
import sys
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

from compile_watch import CompileWatch, describe  # noqa: E402


class FakeJITFunction:
    """triton.runtime.jit.JITFunction's cache miss: `_do_compile` compiles (here: returns a name)."""

    def __init__(self, name, fails=False):
        self.__name__, self.fails = name, fails

    def _do_compile(self, key, *args):
        if self.fails:
            raise RuntimeError("PassManager::run failed")
        return f"{self.__name__} compiled for {key}"


def fake_triton():
    jit = types.ModuleType("triton.runtime.jit")
    jit.JITFunction = FakeJITFunction
    runtime = types.ModuleType("triton.runtime")
    runtime.jit = jit
    triton = types.ModuleType("triton")
    triton.runtime = runtime
    return {"triton": triton, "triton.runtime": runtime, "triton.runtime.jit": jit}


class CompileWatchTest(unittest.TestCase):
    def test_compiles_are_counted_with_those_in_timed_steps_and_named(self):
        timing = {"now": False}
        stats, sums, broken = FakeJITFunction("_mx_stats_kernel"), FakeJITFunction("_error_sums_kernel"), FakeJITFunction("_mx_kernel", fails=True)
        with mock.patch.dict(sys.modules, fake_triton()):
            original = FakeJITFunction._do_compile
            with CompileWatch(lambda: timing["now"]) as watch:
                self.assertEqual(stats._do_compile("k1", "sig"), "_mx_stats_kernel compiled for k1", "the compile's result passes through")
                timing["now"] = True
                sums._do_compile("k2")
                stats._do_compile("k3")
                with self.assertRaisesRegex(RuntimeError, "PassManager"):
                    broken._do_compile("k4")  # a compile that fails is raised, and counted: its time was spent
                first = watch.take()
                timing["now"] = False
                sums._do_compile("k5")
            self.assertIs(FakeJITFunction._do_compile, original, "the JIT's own method is back after the watch")
            sums._do_compile("k6")  # not watched
        self.assertEqual({k: first[k] for k in ("compiles", "timedCompiles", "timedKernels")},
                         {"compiles": 4, "timedCompiles": 3, "timedKernels": ["_error_sums_kernel", "_mx_kernel", "_mx_stats_kernel"]})
        self.assertGreaterEqual(first["compileMs"], first["timedCompileMs"])
        self.assertEqual([event.key for event in watch.events], ["k5"], "each compile keeps the specialization it compiled for")
        second = watch.take()
        self.assertEqual((second["compiles"], second["timedCompiles"], second["timedKernels"]), (1, 0, []), "a take counts what came after the last")
        self.assertEqual(describe(second), f"Triton compiles: 1 ({second['compileMs']:.0f} ms), none in timed steps")
        self.assertRegex(describe(first), r"^Triton compiles: 4 \(\d+ ms\); 3 of them in timed steps \(\d+ ms: _error_sums_kernel, _mx_kernel, _mx_stats_kernel\): "
                                          r"those steps' times include the compiles$")

    def test_without_triton_nothing_is_watched(self):
        with mock.patch.dict(sys.modules, {"triton": None}), CompileWatch(lambda: True) as watch:
            summary = watch.take()
        self.assertEqual(summary, {"compiles": 0, "compileMs": 0, "timedCompiles": 0, "timedCompileMs": 0, "timedKernels": []})
        self.assertEqual(describe(summary), "Triton compiles: 0 (0 ms), none in timed steps")


if __name__ == "__main__":
    unittest.main()

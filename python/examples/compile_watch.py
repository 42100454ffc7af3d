"""Triton compiles while a benchmark runs, and which of them fell in its timed steps.

Triton compiles a kernel the first time a launch needs a specialization it has not met: 0.5-1.3 s on
the H200 machines, more with an empty disk cache on a machine just started. A compile inside a timed
step is not the cost of what that step measures (a MoE bench's stats step read 758.6 ms with one in
it, ~500 ms without: docs/bridge.md, "compiles in the middle of a run"), so the benchmarks print how
many their timed steps held. Without Triton nothing is watched and every count is 0.
"""
from __future__ import annotations

import time
from typing import Any, Callable, List, NamedTuple


class Compile(NamedTuple):
    kernel: str
    ms: float
    #: Whether `timed()` said a timed step was running.
    timed: bool
    #: The specialization it compiled for (what a test names when a compile should not have happened).
    key: Any


class CompileWatch:
    """While entered, records each Triton compile (the JIT's cache misses) in `events`."""

    def __init__(self, timed: Callable[[], bool]):
        self.timed = timed
        self.events: List[Compile] = []
        self._restore = None

    def __enter__(self) -> "CompileWatch":
        try:
            from triton.runtime import jit
        except ImportError:
            return self
        original = jit.JITFunction._do_compile
        events, timed = self.events, self.timed

        def _do_compile(kernel, key, *args, **kwargs):
            started = time.perf_counter()
            try:
                return original(kernel, key, *args, **kwargs)
            finally:
                events.append(Compile(getattr(kernel, "__name__", type(kernel).__name__), (time.perf_counter() - started) * 1000, bool(timed()), key))
        jit.JITFunction._do_compile = _do_compile
        self._restore = lambda: setattr(jit.JITFunction, "_do_compile", original)
        return self

    def __exit__(self, *exc) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    def take(self) -> dict:
        """The compiles since the last take: how many and their ms, in all and in timed steps, and the
        kernels compiled in timed steps."""
        taken = self.events[:]
        del self.events[:]
        in_timed = [event for event in taken if event.timed]
        return {"compiles": len(taken), "compileMs": round(sum(event.ms for event in taken), 1),
                "timedCompiles": len(in_timed), "timedCompileMs": round(sum(event.ms for event in in_timed), 1),
                "timedKernels": sorted({event.kernel for event in in_timed})}


def describe(summary: dict) -> str:
    """One line for a benchmark's output: the compiles, and a warning where timed steps held some."""
    line = f"Triton compiles: {summary['compiles']} ({summary['compileMs']:.0f} ms)"
    if not summary["timedCompiles"]:
        return line + ", none in timed steps"
    return (line + f"; {summary['timedCompiles']} of them in timed steps ({summary['timedCompileMs']:.0f} ms: "
            f"{', '.join(summary['timedKernels'])}): those steps' times include the compiles")

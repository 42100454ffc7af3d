"""Launching a compiled Triton kernel again without Triton's per-call Python.

`kernel[grid](*args, **constexprs)` works out on every call what the compiled kernel is specialized
for (each argument's type, a pointer's 16-byte alignment, an integer's divisibility by 16 and
equality to 1), formats a cache key string from it and looks the kernel up. An emulated step makes
~900 launches (a stats step ~850), so on a slow host, steps that launch from Python become
host-bound. Relaunching saved 8-12 µs of host time per MXFP4 launch on the H100 machine (a
`quantize` call of values along the last axis 45.7 → 34.0 µs; docs/bridge.md).

`Relauncher` keeps the CompiledKernel that Triton's own launch returned, under a key made of the
facts Triton specializes on (so two calls with one key get one kernel from Triton too), and calls its
launcher directly the next time. The key also holds those facts of the integers a kernel marks
`do_not_specialize`: finer than Triton's, so a new combination of them takes Triton's own launch once
(no compile: Triton finds its kernel) before it is relaunched directly. A first launch, Triton's
launch hooks (a profiler such as proton sets them) and an older Triton without `triton.knobs` all
take Triton's own path.

A first launch whose compile fails in Triton's MLIR pass pipeline is compiled once more: on the H100
machines (Triton 3.6, 27 Nov 2026) the pipeline crashed once on a kernel and specialization that it
compiled on every other run of the same GPU test, and a crash there would end the trainer's step.
"""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import torch

try:  # an older Triton without knobs: every launch takes Triton's own path
    from triton import knobs
    from triton.runtime.driver import driver
except ImportError:  # pragma: no cover - depends on the install
    knobs = driver = None

#: What Triton's compiler raises when its MLIR pass pipeline fails (a crash, not a diagnosis of the kernel).
PIPELINE_FAILED = "PassManager::run failed"

_I32 = 2 ** 31
_U63 = 2 ** 63


def specialization_key(args: Sequence[Any]) -> Tuple:
    """What Triton specializes runtime arguments on (triton.runtime.jit's specialize_impl): a tensor's
    dtype and 16-byte alignment, an integer's equality to 1, divisibility by 16 and width, a float's or
    a bool's type. Inline, as this runs at every launch."""
    return tuple((a.dtype, a.data_ptr() & 15 == 0) if isinstance(a, torch.Tensor)
                 else (a == 1, a & 15 == 0, -_I32 <= a < _I32, a >= _U63) if a.__class__ is int
                 else a.__class__ for a in args)


def _hooked(hook) -> bool:
    # Triton 3.6 keeps its launch hooks in HookChain objects, empty unless a tool added a hook; earlier ones in None.
    return hook is not None and bool(getattr(hook, "calls", True))


class Relauncher:
    """Launches `fn` (a @triton.jit or @gluon.jit kernel whose constexpr parameters all come after its
    runtime ones) on a 1-D grid through the compiled kernel of an earlier launch with the same key."""

    def __init__(self, fn):
        self.fn = fn
        self._kernels: Dict[Tuple, Any] = {}
        self.direct_launches = 0
        #: compiles tried again after a crash of Triton's MLIR pass pipeline
        self.pipeline_retries = 0

    def __call__(self, programs: int, args: Sequence[Any], constexprs: Dict[str, Any], **options) -> None:
        if driver is None:
            self.fn[(programs,)](*args, **constexprs, **options)
            return
        device = driver.active.get_current_device()
        key = (device, specialization_key(args), *constexprs.values(), *options.items())
        kernel = self._kernels.get(key)
        if kernel is None or _hooked(knobs.runtime.launch_enter_hook) or _hooked(knobs.runtime.launch_exit_hook):
            kernel = self._compiled_launch(programs, args, constexprs, options)
            if getattr(kernel, "run", None) is not None and hasattr(kernel, "packed_metadata"):
                self._kernels[key] = kernel
            return
        stream = driver.active.get_current_stream(device)
        kernel.run(programs, 1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, *args, *constexprs.values())
        self.direct_launches += 1

    def _compiled_launch(self, programs: int, args: Sequence[Any], constexprs: Dict[str, Any], options: Dict[str, Any]):
        """Triton's own launch (which compiles on a cache miss), tried a second time when the compile
        crashed in the MLIR pass pipeline; any other error, or a second crash, is raised."""
        try:
            return self.fn[(programs,)](*args, **constexprs, **options)
        except RuntimeError as error:
            if PIPELINE_FAILED not in str(error):
                raise
            self.pipeline_retries += 1
            return self.fn[(programs,)](*args, **constexprs, **options)

"""torch.compile and the bridge's Python-level work.

A compiled model guards on its modules' hooks: attaching the observing hooks for a capturing step
and removing them after made it recompile or break its graphs at every capturing step (nanoGPT
compiled and observed: 176 ms per iteration against 51.5 ms without the bridge). While the hooks
are attached, compiled code runs eagerly instead (torch.compiler.set_stance("force_eager"),
torch 2.6+); the other steps run the graphs compiled without hooks. Emulated GEMMs launch Triton
kernels from an autograd Function, which dynamo is told to leave to Python (`eager`)."""
from __future__ import annotations

from typing import Callable, Optional

import torch

from .lifecycle import keep_sigint_exit

keep_sigint_exit()  # before `eager` imports torch._dynamo


def force_eager() -> Optional[object]:
    """Compiled code runs eagerly until `restore` of what this returns (None where torch cannot)."""
    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else None


def restore(stance: Optional[object]) -> None:
    if stance is not None:
        stance.__exit__(None, None, None)


def eager(fn: Callable) -> Callable:
    """`fn` run as Python under torch.compile (a graph break around it), unchanged without it."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn

"""Making a CUDA stream current for a few calls, at the host cost of a few C calls.

`torch.cuda.stream(s)` finds the current device twice per use through `_get_device_index(None)`,
which asks `torch.cuda.is_available()` (NVML and an environment read) each time: about 40 µs of host
time a use under cProfile on an H200 machine. The backward worker does it for every layer it
measures and the lag-1 store for every chunk it copies, several hundred times a stats step, on the
thread whose host time sets the pace of a stats step (docs/bridge.md, "The backward worker on a
stream of its own")."""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def on_stream(stream: "torch.cuda.Stream") -> Iterator["torch.cuda.Stream"]:
    """`with torch.cuda.stream(stream)`: kernels launched inside go to `stream`; afterwards the
    stream its device had is current again, and so is the device that was (making a stream current
    makes its device current)."""
    device = torch.cuda.current_device()
    previous = torch.cuda.current_stream(stream.device)
    torch.cuda.set_stream(stream)
    try:
        yield stream
    finally:
        torch.cuda.set_stream(previous)
        if stream.device_index != device:
            torch.cuda.set_device(device)

"""Step records whose loss and gradient norm are still on the device.

Reading a CUDA scalar (`loss.item()`, `float(loss)`) waits for every kernel queued before it: done in
end_step, before the optimizer's step, the GPU then idles while Python prepares the optimizer. A
tensor handed to end_step instead goes to pinned host memory behind the step's kernels, and the
publisher thread reads it when the record's turn to be sent comes (records keep their order).
"""
from __future__ import annotations

from typing import Optional

import torch

#: The step record's fields that may be given as tensors.
SCALAR_FIELDS = ("loss", "gradNorm")


def finite(value) -> Optional[float]:
    """A float, or None for None, NaN and ±Inf (the protocol's nullable numbers)."""
    if value is None:
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


class DeferredRecord(dict):
    """A record with device scalars in flight to the host: `resolve()` waits for them (off the training thread)."""

    def __init__(self, record: dict, fields, host: torch.Tensor, event: "torch.cuda.Event"):
        super().__init__(record)
        self._pending = (tuple(fields), host, event)

    def resolve(self) -> None:
        if self._pending is None:
            return
        fields, host, event = self._pending
        event.synchronize()  # releases the GIL while it waits
        for name, value in zip(fields, host.tolist()):
            self[name] = finite(value)
        self._pending = None


def _scalar(name: str, value: torch.Tensor) -> torch.Tensor:
    if value.numel() != 1:
        raise ValueError(f"end_step: {name} is a tensor of shape {tuple(value.shape)}; pass a number or a one-element tensor")
    return value.detach().reshape(()).to(torch.float64)


def step_record(record: dict) -> dict:
    """The step record with its loss and gradNorm as floats, or a DeferredRecord whose CUDA scalars
    are on their way to the host (no wait here)."""
    on_device = [name for name in SCALAR_FIELDS if isinstance(record.get(name), torch.Tensor) and record[name].is_cuda]
    for name in SCALAR_FIELDS:
        value = record.get(name)
        if name not in on_device:
            record[name] = finite(_scalar(name, value).item() if isinstance(value, torch.Tensor) else value)
    if not on_device:
        return record
    values = torch.stack([_scalar(name, record[name]) for name in on_device])
    host = torch.empty(values.shape, dtype=torch.float64, pin_memory=True)
    host.copy_(values, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    for name in on_device:
        record[name] = None
    return DeferredRecord(record, on_device, host, event)


def resolved(record: dict) -> dict:
    """The record with every deferred field read (waits for the device when one is pending)."""
    if isinstance(record, DeferredRecord):
        record.resolve()
    return record

"""Small host tensors (indices, offsets, flags) handed to the GPU without holding the host up."""
from __future__ import annotations

import torch


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor on `device`; to a GPU from pinned memory, without waiting: a copy from pageable
    memory (`tensor.to(device)`) waits until the GPU has done all the stream was given, and the host
    then has nothing queued ahead of it."""
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)

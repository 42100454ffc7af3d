"""Block Hadamard rotation along a GEMM's reduction dimension (the last axis of each operand).

Both operands of a GEMM are multiplied by the same orthogonal R = diag(signs)·blockdiag(H/√b), so
(A·R)(B·R)ᵀ = A·Bᵀ: the exact product is unchanged and only the quantization error moves.
`hadamard` uses no signs (the same H every step); `random-hadamard` draws fresh ±1 signs, one per
element of the reduction dimension, every call (as src/mx/hadamard.ts does).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple, Optional

import torch

ROTATIONS = ("none", "hadamard", "random-hadamard")
HADAMARD_BLOCKS = (16, 32, 64, 128)


class Rotation(NamedTuple):
    #: [b, b] orthonormal Hadamard matrix
    h: torch.Tensor
    #: [n] ±1 per element of the reduction dimension, or None
    signs: Optional[torch.Tensor]


class DeviceGenerators:
    """One seeded torch.Generator per device, so rotations and stochastic rounding neither read nor
    disturb the training script's own random streams."""

    def __init__(self, seed: int):
        self.seed = seed
        self._by_device = {}

    def __call__(self, device: torch.device) -> torch.Generator:
        device = torch.device(device)
        if device not in self._by_device:
            generator = torch.Generator(device=device)
            generator.manual_seed(self.seed)
            self._by_device[device] = generator
        return self._by_device[device]


# Cached per device: a host-to-device copy at every GEMM call would synchronize the stream.
@lru_cache(maxsize=None)
def hadamard_matrix(size: int, device: torch.device) -> torch.Tensor:
    """The orthonormal Sylvester Hadamard matrix H/√size (float32)."""
    if size not in HADAMARD_BLOCKS:
        raise ValueError(f"Hadamard block {size} is not one of {HADAMARD_BLOCKS}")
    h = torch.ones(1, 1)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(size)).to(device=device)


def make_rotation(rotation: str, block: int, length: int, device: torch.device, generator: Optional[torch.Generator] = None) -> Optional[Rotation]:
    """The rotation for one GEMM call over a reduction dimension of `length` (None for `none`);
    share it between the GEMM's two operands."""
    if rotation == "none":
        return None
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation {rotation!r} is not one of {ROTATIONS}")
    signs = None
    if rotation == "random-hadamard":
        signs = torch.randint(0, 2, (length,), generator=generator, device=device).to(torch.float32) * 2 - 1
    return Rotation(hadamard_matrix(block, torch.device(device)), signs)


def rotate(x: torch.Tensor, r: Optional[Rotation], what: str = "operand") -> torch.Tensor:
    """x·R along the last axis, in float32.

    The arithmetic is fixed so that every implementation gives the same bits (src/mx/hadamard.ts, the
    Triton kernels in mxfp4_triton.py): each element is multiplied by ±1/√b (1/√b rounded to float32),
    then butterflies (a + b, a − b) run with strides 1, 2, 4, … b/2 in float32."""
    x = x.to(torch.float32)
    if r is None:
        return x
    block = r.h.shape[0]
    n = x.shape[-1]
    if n % block:
        raise ValueError(f"{what}: reduction dimension {n} is not a multiple of the Hadamard block {block}; choose a block that divides it or rotation none")
    norm = hadamard_norm(block)
    x = x * (r.signs * norm if r.signs is not None else norm)
    lead = x.shape[:-1]
    h = 1
    while h < block:
        pairs = x.reshape(*lead, n // (2 * h), 2, h)
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        x = torch.stack([a + b, a - b], dim=-2).reshape(*lead, n)
        h *= 2
    return x


def hadamard_norm(block: int) -> float:
    """1/√block rounded to float32, the factor every element is multiplied by."""
    return float(torch.tensor(1 / math.sqrt(block), dtype=torch.float32))

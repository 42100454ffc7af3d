"""Block Hadamard rotation along a GEMM's reduction dimension (the last axis of each operand).

Both operands of a GEMM are multiplied by the same orthogonal R = diag(signs)·blockdiag(H/√b), so
(A·R)(B·R)ᵀ = A·Bᵀ: the exact product is unchanged and only the quantization error moves.
`hadamard` uses no signs (the same H every step); `fixed-sign-hadamard` uses ±1 signs fixed for the
run (TransformerEngine's 16-entry vector for block 16, see formats.fixed_signs); `random-hadamard` draws fresh ±1 signs, one per
element of the reduction dimension, every call (as src/mx/hadamard.ts does), keyed to the call's
operand (draws.py: a checkpoint's recompute draws the same signs).

A block that does not divide the reduction dimension n is handled by zero-padding both operands to
the next multiple n' of the block before rotating (`MISFITS`: "pad", the default), which leaves the
exact product unchanged; the GEMM then reduces over n' rotated elements. "skip" runs such a GEMM
unrotated instead, and "error" refuses the configuration when the bridge attaches (`fit`).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple, Optional

import torch

from .draws import Draws, keyed
from .formats import fixed_signs
from .protocol import HADAMARD_BLOCKS, ROTATIONS

#: What to do with a reduction dimension the Hadamard block does not divide.
MISFITS = ("pad", "skip", "error")


def padded_length(length: int, block: int) -> int:
    return -(-length // block) * block


def pad_to_block(x: torch.Tensor, block: int) -> torch.Tensor:
    """x with zero columns appended up to the next multiple of `block` (x itself when it fits);
    zeros are exact in any dtype and add nothing to a product."""
    n = padded_length(x.shape[-1], block)
    return torch.nn.functional.pad(x, (0, n - x.shape[-1])) if n != x.shape[-1] else x


def fit(rotation: str, block: int, length: Optional[int], misfit: str = "pad") -> dict:
    """How a GEMM with reduction dimension `length` (None: the token count, known per step) honours
    the rotation: {"status": none|rotated|padded|skipped, "dim"?, "paddedTo"?}; raises
    ValueError for a misfit under misfit="error" (the caller names the layer and GEMM)."""
    if misfit not in MISFITS:
        raise ValueError(f"hadamard_misfit {misfit!r} is not one of {', '.join(MISFITS)}")
    if rotation == "none":
        return {"status": "none"} if length is None else {"status": "none", "dim": length}
    if length is None:
        return {"status": "rotated"}
    if length % block == 0:
        return {"status": "rotated", "dim": length}
    if misfit == "error":
        raise ValueError(f"reduction dimension {length} is not a multiple of the Hadamard block {block}")
    if misfit == "skip":
        return {"status": "skipped", "dim": length}
    return {"status": "padded", "dim": length, "paddedTo": padded_length(length, block)}


class Rotation(NamedTuple):
    #: [b, b] orthonormal Hadamard matrix
    h: torch.Tensor
    #: [n] ±1 per element of the reduction dimension, or None
    signs: Optional[torch.Tensor]


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


def make_rotation(rotation: str, block: int, length: int, device: torch.device, draws: Optional[Draws] = None,
                  misfit: str = "pad") -> Optional[Rotation]:
    """The rotation for one GEMM call over a reduction dimension of `length` (None for `none`, and
    for a misfit under "skip"); share it between the GEMM's two operands. `draws`: the call's
    (random signs are keyed to its operand; fixed signs come from its seed). Never raises for a misfit
    at run time: "error" was enforced at attach time, and a token count is padded."""
    if rotation == "none":
        return None
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation {rotation!r} is not one of {ROTATIONS}")
    if misfit == "skip" and length % block:
        return None
    signs = None
    if rotation == "random-hadamard":
        signs = keyed(draws, "a random Hadamard rotation").signs(padded_length(length, block), device)
    elif rotation == "fixed-sign-hadamard":
        signs = fixed_signs(block, padded_length(length, block), draws.seed if draws is not None else 0, torch.device(device))
    return Rotation(hadamard_matrix(block, torch.device(device)), signs)


def rotate(x: torch.Tensor, r: Optional[Rotation], what: str = "operand") -> torch.Tensor:
    """x·R along the last axis, in float32; a last axis the block does not divide is zero-padded to
    the next multiple first (do the same to the other operand: make_rotation's R fits both).

    The arithmetic is fixed so that every implementation gives the same bits (src/mx/hadamard.ts, the
    Triton kernels in mxfp4_triton.py): each element is multiplied by ±1/√b (1/√b rounded to float32),
    then butterflies (a + b, a − b) run with strides 1, 2, 4, … b/2 in float32."""
    x = x.to(torch.float32)
    if r is None:
        return x
    block = r.h.shape[0]
    x = pad_to_block(x, block)
    n = x.shape[-1]
    if r.signs is not None and r.signs.shape[0] != n:
        raise ValueError(f"{what}: the rotation's signs cover {r.signs.shape[0]} elements, the operand {n}; share one rotation per GEMM")
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


@lru_cache(maxsize=None)
def hadamard_norm(block: int) -> float:
    """1/√block rounded to float32, the factor every element is multiplied by (asked for at every
    kernel launch: cached)."""
    return float(torch.tensor(1 / math.sqrt(block), dtype=torch.float32))

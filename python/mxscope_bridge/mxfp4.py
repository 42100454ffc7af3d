"""MXFP4 (OCP microscaling, FP4 E2M1 elements, E8M0 scale, 32-element blocks) in exact arithmetic.

The shared exponent comes from the float32 exponent bits of the block's amax (floor(log2 amax) - 2,
clamped to [-127, 127]); elements round on the E2M1 grid {0, .5, 1, 1.5, 2, 3, 4, 6} and saturate to
6. Signed zeros follow microxcaling: a -0.0 input gives +0.0, a negative input that rounds to zero
gives -0.0 unless its scaled value underflowed to zero. This is the `exact_*` arithmetic of the
golden vectors in shared/testdata/mxfp4 (their `even` mode is our `nearest-even`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .draws import Draws, keyed

BLOCK = 32
E2M1_MAX = 6.0
SCALE_MIN_EXP = -127
SCALE_MAX_EXP = 127
#: Histogram bins: one per unbiased exponent -127..127, then one for NaN-scale blocks.
HIST_BINS = SCALE_MAX_EXP - SCALE_MIN_EXP + 1
NAN_BIN = HIST_BINS
#: A prescale of 3/4 keeps stochastic rounding below the saturation point (the RHT+SR recipe).
SR_PRESCALE = 0.75


def exp2_int(e: torch.Tensor) -> torch.Tensor:
    """2**e as float32 for integer e in [-149, 127], built from the IEEE bits (exact, subnormals too)."""
    e = e.to(torch.int32)
    normal = (e + 127).clamp(min=0) << 23
    subnormal = torch.ones_like(e) << (e + 149).clamp(min=0, max=22)
    return torch.where(e >= -126, normal, subnormal).view(torch.float32)


def shared_exponents(amax: torch.Tensor) -> torch.Tensor:
    """Unbiased E8M0 exponent per block (int32); the value for non-finite amax is meaningless."""
    usable = torch.isfinite(amax) & (amax > 0)
    _, e = torch.frexp(torch.where(usable, amax, torch.ones_like(amax)))
    shared = e.to(torch.int32) - 1 - 2  # floor(log2 amax) minus E2M1's emax
    shared = torch.where(amax == 0, torch.full_like(shared, SCALE_MIN_EXP), shared)
    return shared.clamp(min=SCALE_MIN_EXP, max=SCALE_MAX_EXP)


def _round_nearest_even(a: torch.Tensor) -> torch.Tensor:
    # Each binade of the E2M1 grid is uniform (steps .5, 1, 2), and the parity of the grid integer
    # equals the parity of the code index, so torch.round (half to even) is exact ties-to-even.
    return torch.where(a < 2, torch.round(a * 2) * 0.5, torch.where(a < 4, torch.round(a), torch.round(a * 0.5) * 2))


def _round_stochastic(a: torch.Tensor, draws: Optional[Draws], k_pad: int) -> torch.Tensor:
    # a: [blocks, 32], the operand's [rows, k_pad] layout in order, so element i's uniform is draws' i-th.
    step = torch.where(a < 2, torch.full_like(a, 0.5), torch.where(a < 4, torch.ones_like(a), torch.full_like(a, 2.0)))
    low = torch.floor(a / step) * step
    u = keyed(draws, "stochastic rounding").uniforms(a.numel(), k_pad, a.device).reshape(a.shape)
    return low + step * (u < (a - low) / step).to(a.dtype)


@dataclass
class Quantized:
    """A quantized tensor (dequantized values, float32, the input's shape) and its block intermediates."""

    values: torch.Tensor
    #: number of real (not padding) elements
    elements: int
    #: [n_blocks, 32] the input as float32 (zero-padded), before any prescale
    blocks: torch.Tensor
    #: [n_blocks, 32] the dequantized blocks (zero-padded)
    deq_blocks: torch.Tensor
    #: [n_blocks] int32 unbiased exponents; meaningless where `nan_block` is set.
    shared_exp: torch.Tensor
    #: [n_blocks] bool: the block held NaN or ±Inf (E8M0 0xFF).
    nan_block: torch.Tensor
    #: [n_blocks, 32] rounded magnitudes on the E2M1 grid before saturation (8 = clamped to 6).
    grid: torch.Tensor


def quantize(x: torch.Tensor, rounding: str = "nearest-even", sr_prescale: bool = False, draws: Optional[Draws] = None) -> Quantized:
    """Quantize along the last axis in 32-element blocks (a partial last block is zero-padded).
    Stochastic rounding takes its uniforms from `draws` (draws.py)."""
    if rounding not in ("nearest-even", "stochastic"):
        raise ValueError(f"rounding {rounding!r} is not one of nearest-even, stochastic")
    shape = x.shape
    n = shape[-1] if len(shape) > 0 else 1
    # A reduction over nothing (a Wgrad over a micro-batch's zero tokens: an expert no token was routed to) has no blocks.
    rows = x.to(torch.float32).reshape(-1, n) if n else x.new_zeros((0, BLOCK), dtype=torch.float32)
    pad = (-n) % BLOCK
    if pad:
        rows = torch.nn.functional.pad(rows, (0, pad))
    source = rows.reshape(-1, BLOCK)
    blocks = source * SR_PRESCALE if sr_prescale else source
    amax = blocks.abs().amax(dim=1)
    nan_block = ~torch.isfinite(amax)
    shared = shared_exponents(amax)
    scaled = blocks * exp2_int(-shared)[:, None]
    a = scaled.abs()
    grid = _round_stochastic(a, draws, n + pad) if rounding == "stochastic" else _round_nearest_even(a)
    signed = torch.where(scaled < 0, -grid, grid).clamp(-E2M1_MAX, E2M1_MAX)
    out = signed * exp2_int(shared)[:, None]
    out = torch.where(nan_block[:, None], torch.full_like(out, float("nan")), out)
    if sr_prescale:
        out = out / SR_PRESCALE
    values = out.reshape(-1, n + pad)[:, :n].reshape(shape) if n else x.to(torch.float32)
    return Quantized(values, x.numel(), source, out, shared, nan_block, grid)


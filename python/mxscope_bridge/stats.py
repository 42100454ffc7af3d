"""Telemetry math on the tensors' own device, as fixed-length float64 vectors so that a whole step's
stats move to the host (and across ranks) in one transfer: counts and energies add up across
micro-batches and data-parallel ranks; the record fields are derived from the sums at the end.
"""
from __future__ import annotations

import math
import sys
from typing import List, Optional

import torch

from . import mxfp4

# Operand vector: these sums, then HIST_BINS exponent counts, then the NaN-block count.
ELEMENTS, NONZERO, SATURATED, FLUSHED, SIGNAL, NOISE = range(6)
OPERAND_SCALARS = 6
OPERAND_LEN = OPERAND_SCALARS + mxfp4.HIST_BINS + 1


def operand_vector(q: mxfp4.Quantized) -> torch.Tensor:
    """Sums describing how the quantizer's input (rotated, reduction dim last) quantized as `q`."""
    blocks, deq, device = q.blocks, q.deq_blocks, q.blocks.device
    nonzero = blocks != 0
    # Few kernels and no device synchronization (no bincount, no host-to-device copies): the stats
    # step runs this for every operand of every layer. histc with fixed bounds counts in shared
    # memory; a scatter_add into 256 global bins serializes on atomics.
    counts = torch.stack([nonzero, q.grid > mxfp4.E2M1_MAX, nonzero & (q.grid == 0)]).sum(dim=(1, 2), dtype=torch.float64)
    energies = torch.stack([blocks, blocks - deq]).square().sum(dim=(1, 2), dtype=torch.float64)
    scalars = torch.cat([torch.full((1,), float(q.elements), device=device, dtype=torch.float64), counts, energies])
    bins = torch.where(q.nan_block, torch.full_like(q.shared_exp, mxfp4.NAN_BIN), q.shared_exp - mxfp4.SCALE_MIN_EXP)
    hist = torch.histc(bins.to(torch.float32), bins=mxfp4.HIST_BINS + 1, min=0, max=mxfp4.HIST_BINS + 1).to(torch.float64)
    return torch.cat([scalars, hist])


def finite_or_none(value: float) -> Optional[float]:
    return value if math.isfinite(value) else None


def ratio(num: float, den: float) -> Optional[float]:
    return finite_or_none(num / den) if den != 0 else None


def operand_stats(operand: str, v: List[float]) -> dict:
    """An OperandStats record from a (possibly rank-summed) operand vector."""
    counts = [int(c) for c in v[OPERAND_SCALARS:OPERAND_SCALARS + mxfp4.HIST_BINS]]
    nan_blocks = int(v[OPERAND_SCALARS + mxfp4.HIST_BINS])
    used = [i for i, c in enumerate(counts) if c]
    histogram = {"minExp": used[0] + mxfp4.SCALE_MIN_EXP, "counts": counts[used[0]:used[-1] + 1]} if used else {"minExp": 0, "counts": []}
    histogram["nanBlocks"] = nan_blocks
    elements = v[ELEMENTS]
    signal, noise = v[SIGNAL], v[NOISE]
    sqnr = 10 * math.log10(signal / noise) if math.isfinite(signal) and math.isfinite(noise) and signal > 0 and noise > 0 else None
    return {
        "operand": operand,
        "blocks": sum(counts) + nan_blocks,
        "elements": int(elements),
        "histogram": histogram,
        "saturatedFrac": v[SATURATED] / elements if elements else 0.0,
        "flushedFrac": v[FLUSHED] / v[NONZERO] if v[NONZERO] else 0.0,
        "sqnrDb": sqnr,
    }


# Wgrad vector: these sums, then the sketch of E_t, then the sketch of E_{t-1}.
GG, EE, EG, EP, PP, HAS_PREV = range(6)
WGRAD_SCALARS = 6


def wgrad_vector(err: torch.Tensor, grad: torch.Tensor, prev: Optional[torch.Tensor], sketch: torch.Tensor) -> torch.Tensor:
    """Sums of E = ∇Ŵ − ∇W, ∇W and E_{t−1} (all already reduced over ranks) plus both sketches."""
    e = err.reshape(-1)
    g = grad.reshape(-1)
    dot = lambda a, b: torch.sum(a * b, dtype=torch.float64)  # noqa: E731
    zero = torch.zeros((), device=e.device, dtype=torch.float64)
    p = prev.reshape(-1) if prev is not None else None
    scalars = torch.stack([
        dot(g, g), dot(e, e), dot(e, g),
        dot(e, p) if p is not None else zero,
        dot(p, p) if p is not None else zero,
        torch.ones((), device=e.device, dtype=torch.float64) if p is not None else zero,
    ])
    sk_prev = p[sketch] if p is not None else torch.zeros(sketch.shape, device=e.device)
    return torch.cat([scalars, e[sketch].to(torch.float64), sk_prev.to(torch.float64)])


def _norm(sum_of_squares: float) -> float:
    # The record's norms are not nullable: non-finite ones become the largest double, as in src/trainer/stats.ts.
    return math.sqrt(sum_of_squares) if math.isfinite(sum_of_squares) and sum_of_squares >= 0 else sys.float_info.max


def _sketch(values: List[float]) -> List[float]:
    return [float(s) if math.isfinite(s) else 0.0 for s in values]


def wgrad_error(v: List[float], sketch_size: int) -> dict:
    gg, ee, eg = v[GG], v[EE], v[EG]
    grad_norm, err_norm = _norm(gg), _norm(ee)
    has_prev = v[HAS_PREV] > 0
    prev_norm = math.sqrt(max(v[PP], 0.0))
    sketch = v[WGRAD_SCALARS:WGRAD_SCALARS + sketch_size]
    prev = v[WGRAD_SCALARS + sketch_size:WGRAD_SCALARS + 2 * sketch_size]
    return {
        "gradNorm": grad_norm,
        "errNorm": err_norm,
        "relErr": ratio(err_norm, grad_norm),
        "cosErrGrad": ratio(eg, err_norm * grad_norm),
        "alignment": ratio(gg + eg, gg),
        "gradToErr": ratio(grad_norm, err_norm),
        "lag1Cos": ratio(v[EP], err_norm * prev_norm) if has_prev else None,
        "sketch": _sketch(sketch),
        "sketchPrev": _sketch(prev) if has_prev else None,
    }

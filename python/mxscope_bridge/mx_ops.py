"""One operand's MXFP4 (values and/or stats): fused Triton kernels on CUDA when Triton imports, the
torch path (`rotation.rotate` then `mxfp4.quantize`, the reference) otherwise. Both give the same bits.
"""
from __future__ import annotations

import threading
from typing import List, Optional, Sequence, Tuple

import torch

from . import mxfp4, mxfp4_triton, stats
from .draws import Draws
from .host_to_device import to_device
from .rotation import Rotation, pad_to_block, rotate


def _triton_fits(x: torch.Tensor) -> bool:
    # An empty operand goes the torch path (nothing to launch for).
    return mxfp4_triton.available(x) and x.dim() == 2 and x.numel() > 0


def _misfit(x: torch.Tensor, r: Optional[Rotation]) -> bool:
    """A Hadamard block that does not divide K: both operands are zero-padded to the next multiple."""
    return r is not None and x.shape[1] % r.h.shape[0] != 0


def _padded(x: torch.Tensor, r: Optional[Rotation]) -> torch.Tensor:
    """x padded as `rotation.rotate` pads before rotating: the kernel then sees whole blocks, and
    gives the torch path's bits. LoRA's rank-16 reduction under a 32-block went the torch path's ~40
    launches before."""
    return pad_to_block(x, r.h.shape[0]) if r is not None else x


#: Rows of one zeroed slab: a stats step takes ~5 rows per layer, each of which was a zeroing launch.
SLAB_ROWS = 64
#: float64 slots a slab gives each row: STATS_LEN rounded up to 16 bytes. Triton specializes a kernel
#: on whether a pointer is 16-byte aligned, so rows of STATS_LEN (an odd count) alternated between two
#: compiled variants of every stats launch.
ROW_SLOTS = -(-mxfp4_triton.STATS_LEN // 2) * 2


class _Slabs(threading.local):
    def __init__(self):
        #: device -> (this thread's current slab's rows, rows of it handed out)
        self.by_device = {}


_slabs = _Slabs()


def stats_row(device) -> torch.Tensor:
    """A zeroed float64 row that the kernels add one operand's stats into: the next row of a zeroed
    slab of this thread's (a thread keeps to one stream). Rows are never handed out twice; a slab is
    freed with its last row. The slab's rows are made in one call (a view each costs as much as the
    rest of this function on a GPU machine's host)."""
    key = device if isinstance(device, torch.device) else torch.device(device)
    rows, used = _slabs.by_device.get(key, (None, SLAB_ROWS))
    if used == SLAB_ROWS:
        rows, used = torch.zeros(SLAB_ROWS, ROW_SLOTS, dtype=torch.float64, device=key)[:, :mxfp4_triton.STATS_LEN].unbind(0), 0
    _slabs.by_device[key] = (rows, used + 1)
    return rows[used]


def sums_of_row(row: torch.Tensor, elements: int, padded: int) -> stats.OperandSums:
    h = mxfp4_triton.STATS_HIST
    return stats.OperandSums(elements, padded, row[:mxfp4_triton.STATS_COUNTS], row[mxfp4_triton.STATS_COUNTS:h], row[h:])


def quantize_operand(x: torch.Tensor, gemm: dict, r: Optional[Rotation], draws: Optional[Draws], what: str,
                     out_dtype: Optional[torch.dtype] = None, with_stats: bool = False, row: Optional[torch.Tensor] = None,
                     out_row_major: bool = False, copy: Optional[torch.Tensor] = None) -> Tuple[Optional[torch.Tensor], Optional[stats.OperandSums]]:
    """MXFP4 of the 2-D operand x [rows, K] (reduction dim last; a transposed view is fine) with the
    GEMM's rotation `r` and rounding: (dequantized values of x's shape in `out_dtype`, or None when
    out_dtype is None, laid out like x or, with out_row_major, contiguous; OperandSums when with_stats). On CUDA the stats are added into `row` (from
    `stats_row`, possibly shared by the row chunks of one operand) when one is given."""
    stochastic = gemm["rounding"] == "stochastic"
    prescale = bool(gemm["srPrescale"])
    if _triton_fits(x):
        x = _padded(x, r)
        if with_stats and row is None:
            row = stats_row(x.device)
        values = mxfp4_triton.quantize(x, r.signs if r is not None else None, r.h.shape[0] if r is not None else 1, stochastic, prescale,
                                       draws, out_dtype, row if with_stats else None, out_row_major, copy)
        rows, k = x.shape
        return values, (sums_of_row(row, rows * k, rows * (-(-k // mxfp4.BLOCK) * mxfp4.BLOCK)) if with_stats else None)
    q = mxfp4.quantize(rotate(x, r, what), gemm["rounding"], prescale, draws)
    values = q.values.to(out_dtype) if out_dtype is not None else None
    return values, (stats.operand_sums(q) if with_stats else None)


def segment_stats(views: Sequence[torch.Tensor], gemm: dict, r: Optional[Rotation]) -> Optional[List[stats.OperandSums]]:
    """quantize_operand's stats of each operand in `views` (no values), in one launch where Gluon's
    kernel takes them: non-empty 2-D CUDA views of one storage with one dtype and the same strides (a
    grouped call's experts: rows or stretches of one tensor, or the slices of a stacked parameter),
    nearest-even rounding, every K a whole number of Hadamard blocks, and signs only where every K is
    the same. None otherwise: measure each with quantize_operand (the same stats)."""
    if not views or gemm["rounding"] == "stochastic" or not _triton_fits(views[0]):
        return None
    first = views[0]
    hadamard = r.h.shape[0] if r is not None else 1
    storage = first.untyped_storage().data_ptr()
    if any(v.dim() != 2 or v.numel() == 0 or v.dtype != first.dtype or v.stride() != first.stride() or v.device != first.device
           or v.shape[1] % hadamard or v.untyped_storage().data_ptr() != storage for v in views):
        return None
    if r is not None and r.signs is not None and any(v.shape[1] != first.shape[1] for v in views):
        return None
    base = min(views, key=lambda v: v.data_ptr())
    table = [((v.data_ptr() - base.data_ptr()) // v.element_size(), v.shape[0], v.shape[1]) for v in views]
    segments = to_device(torch.tensor(table, dtype=torch.int64), first.device)
    rows = torch.zeros(len(views), mxfp4_triton.STATS_LEN, dtype=torch.float64, device=first.device)
    blocks = [(count, -(-k // mxfp4.BLOCK)) for _, count, k in table]
    if not mxfp4_triton.stats_of_segments(base, first.stride(), segments, max(count * nbk for count, nbk in blocks),
                                          r.signs if r is not None else None, hadamard, bool(gemm["srPrescale"]), rows):
        return None
    # Each part of every row in one call: three slices per row cost ~10 µs of a GPU host's time, ~3,600 rows a MoE stats step.
    h = mxfp4_triton.STATS_HIST
    parts = zip(rows[:, :mxfp4_triton.STATS_COUNTS].unbind(0), rows[:, mxfp4_triton.STATS_COUNTS:h].unbind(0), rows[:, h:].unbind(0))
    return [stats.OperandSums(count * k, count * nbk * mxfp4.BLOCK, counts, energies, hist)
            for (counts, energies, hist), (_, count, k), (_, nbk) in zip(parts, table, blocks)]


def quantize_operand_and_copy(x: torch.Tensor, gemm: dict, r: Optional[Rotation], draws: Optional[Draws], what: str,
                              out_dtype: torch.dtype, with_stats: bool = False, row: Optional[torch.Tensor] = None
                              ) -> Tuple[torch.Tensor, Optional[stats.OperandSums], torch.Tensor]:
    """quantize_operand with contiguous values, and x's exact contiguous copy (what x.contiguous() gives),
    for an exact product beside the quantized one: on CUDA written by the same pass that reads x (a
    transposed x would otherwise be read a second time by a slow strided copy)."""
    if _triton_fits(x) and not _misfit(x, r):
        copy = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        values, sums = quantize_operand(x, gemm, r, draws, what, out_dtype, with_stats, row, out_row_major=True, copy=copy)
        return values, sums, copy
    values, sums = quantize_operand(x, gemm, r, draws, what, out_dtype, with_stats, row, out_row_major=True)
    return values, sums, x.contiguous()

"""Emulated experts through the trainer's grouped GEMM: all experts of one parameter in one launch per
operand to quantize and one grouped product per GEMM, where the expert-by-expert way (experts.py
run_linear) takes three GEMMs and six quantizations per expert: about 3.5× a plain step on a
Qwen3-MoE-shaped model, most of it the host launching ~10 kernels per expert.

The operands' MXFP4 values are the expert-by-expert way's bits:
- Fprop (X·Wᵀ) and Dgrad (∇Y·W) quantize along a model dimension, in blocks that never cross a row,
  so the routed rows of every expert are quantized at once, and so is every expert's weight.
- Wgrad (∇Yᵀ·X) reduces over each expert's own tokens, which the expert-by-expert way pads to whole
  blocks (rotation.py's "pad"). Here each expert's rows are copied to a start that is a multiple of
  the block, zeros between, so that no block holds two experts' tokens, and the grouped product
  sums each expert's padded stretch alone.

Only GEMMs whose values are a function of the operand alone go this way: bf16, and MXFP4 through the
floor scale rule with nearest-even rounding and no rotation or a fixed Hadamard one. Stochastic
rounding and random signs draw by position within an expert's operand, and the block formats of
formats.py scale per operand; those run expert by expert. The products are the grouped GEMM's: their
float32 sums may be added in another order than one GEMM per expert does, so a product can differ
from the expert-by-expert one in its last bit."""
from __future__ import annotations

from typing import Callable, List, Optional

import torch

from . import mx_ops, mxfp4
from .capture import compute_dtype, deterministic
from .rotation import make_rotation, padded_length

#: Rotations that give every expert's operand the same transform wherever its rows lie.
_POSITION_FREE_ROTATIONS = ("none", "hadamard")


def groupable(gemm: dict, misfit: str) -> bool:
    """Whether a GEMM config's operands can be quantized for all experts at once (see above)."""
    if gemm["precision"] == "bf16":
        return True
    if not deterministic(gemm) or gemm["rotation"] not in _POSITION_FREE_ROTATIONS:
        return False
    # "skip" leaves the rotation out for an expert whose token count the block does not divide: Wgrad's
    # rotation would then differ from expert to expert.
    return gemm["rotation"] == "none" or misfit != "skip"


def _quantized(x: torch.Tensor, gemm: dict, dtype: torch.dtype, misfit: str, what: str, row_major: bool = True) -> torch.Tensor:
    """x [rows, K] as the GEMM consumes it in `dtype`, row-major or laid out like x (K padded to the
    Hadamard block where the rotation pads), as capture.gemm_operands makes each expert's."""
    if gemm["precision"] == "bf16":
        values = x.to(torch.bfloat16).to(dtype)
        return values.contiguous() if row_major else values
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], x.shape[-1], x.device, None, misfit)
    values, _ = mx_ops.quantize_operand(x, gemm, r, None, what, dtype, out_row_major=row_major)
    return values


def _block(gemm: dict) -> int:
    """The stretch of a reduction dimension that no block of the GEMM's operands crosses: the MXFP4
    block, or the Hadamard block where it is longer."""
    if gemm["precision"] == "bf16":
        return 1
    return max(mxfp4.BLOCK, gemm["hadamardBlock"] if gemm["rotation"] != "none" else 1)


def _quantized_weights(b: torch.Tensor, gemm: dict, dtype: torch.dtype, misfit: str, what: str) -> torch.Tensor:
    """The grouped GEMM's weights b [E, K, N] (a view of the experts' parameter) with each expert's
    matrix quantized along K, in one launch. Where b is contiguous and whole blocks fill K, its
    experts side by side ([N, E·K]) are quantized in place of a transposed copy: no block crosses
    from one expert to the next."""
    experts, k, n = b.shape
    if b.is_contiguous() and k % _block(gemm) == 0:
        values = _quantized(b.reshape(experts * k, n).t(), gemm, dtype, misfit, what, row_major=False)
        return values.t().view(experts, k, n)
    values = _quantized(b.transpose(1, 2).reshape(experts * n, k), gemm, dtype, misfit, what)
    return values.view(experts, n, -1).transpose(1, 2)


def _spread(rows: torch.Tensor, counts: List[int], block: int) -> tuple:
    """rows [Σcounts, n] with each expert's rows starting at a multiple of `block`, zeros between;
    and the ends of the spread experts (int32, on rows' device)."""
    padded = [padded_length(c, block) for c in counts]
    ends = torch.tensor(padded, dtype=torch.int64).cumsum(0)
    if padded == counts:
        return rows, ends.to(device=rows.device, dtype=torch.int32)
    starts = ends - torch.tensor(padded, dtype=torch.int64)
    shifts = starts - (torch.tensor(counts, dtype=torch.int64).cumsum(0) - torch.tensor(counts, dtype=torch.int64))
    shift_of_row = torch.repeat_interleave(shifts, torch.tensor(counts, dtype=torch.int64))
    where = (torch.arange(rows.shape[0]) + shift_of_row).to(rows.device)
    spread = rows.new_zeros(int(ends[-1]), rows.shape[1])
    spread.index_copy_(0, where, rows)
    return spread, ends.to(device=rows.device, dtype=torch.int32)


class GroupedEmulatedExperts(torch.autograd.Function):
    """y = x · weights[e] for the rows [ends[e-1], ends[e]) of x, the three GEMMs emulated at
    `emulation.gemms`. x [rows, in]; weights [E, in, out], as the grouped GEMM takes them; rows past
    the last end get zeros, and no gradient."""

    @staticmethod
    def forward(ctx, x, weights, offs, ends: List[int], emulation, grouped_mm: Callable, what: str):
        dtype = compute_dtype(x)
        gemm, misfit = emulation.gemms["fprop"], emulation.misfit
        xq = _quantized(x, gemm, dtype, misfit, f"{what} fprop")
        y = grouped_mm(xq, _quantized_weights(weights, gemm, dtype, misfit, f"{what} fprop"), offs=offs)
        y[ends[-1]:] = 0
        needs_dx, needs_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(x if needs_dw else None, weights if needs_dx else None, offs)
        # Wgrad in the parameter's own layout where the grouped GEMM took a transposed view of it
        # (transformers' [E, out, in] experts): autograd then hands it on without a copy.
        param_layout = weights.transpose(1, 2).is_contiguous() and not weights.is_contiguous()
        ctx.meta = (ends, emulation, grouped_mm, what, dtype, x.dtype, weights.dtype, param_layout)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weights, offs = ctx.saved_tensors
        ends, emulation, grouped_mm, what, dtype, x_dtype, w_dtype, param_layout = ctx.meta
        misfit = emulation.misfit
        dy = dy.to(dtype)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            gemm = emulation.gemms["dgrad"]
            dyq = _quantized(dy, gemm, dtype, misfit, f"{what} dgrad")
            dx = grouped_mm(dyq, _quantized_weights(weights.transpose(1, 2), gemm, dtype, misfit, f"{what} dgrad"), offs=offs)
            dx[ends[-1]:] = 0
            dx = dx.to(x_dtype)
        if ctx.needs_input_grad[1]:
            dw = _wgrad(dy[:ends[-1]], x[:ends[-1]].to(dtype), ends, emulation.gemms["wgrad"], dtype, misfit, grouped_mm, what,
                        w_dtype, param_layout)
        return dx, dw, None, None, None, None, None


def _wgrad(dy: torch.Tensor, x: torch.Tensor, ends: List[int], gemm: dict, dtype: torch.dtype, misfit: str,
           grouped_mm: Callable, what: str, out_dtype: torch.dtype, param_layout: bool) -> torch.Tensor:
    """[E, in, out] in `out_dtype`: expert e's Xᵀ·∇Y over its own tokens, both quantized along the
    tokens; with param_layout, the transpose of a contiguous [E, out, in]."""
    counts = [end - start for start, end in zip([0] + ends[:-1], ends)]
    block = _block(gemm)
    dy, spread_ends = _spread(dy, counts, block)
    x, _ = _spread(x, counts, block)
    dyq = _quantized(dy.t(), gemm, dtype, misfit, f"{what} wgrad")  # [out, tokens]
    xq = _quantized(x.t(), gemm, dtype, misfit, f"{what} wgrad")  # [in, tokens]
    if param_layout:
        return _grouped_product(grouped_mm, dyq, xq.t(), spread_ends, out_dtype).transpose(1, 2)
    return _grouped_product(grouped_mm, xq, dyq.t(), spread_ends, out_dtype)


_FLOAT32_OUT: List[Optional[bool]] = [None]


def _grouped_product(grouped_mm: Callable, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The grouped product of a [m, K] and b [K, n] split along K, in `out_dtype`: float32 outputs
    come from the grouped GEMM's float32 sums where it gives them (as capture.mm_float32 does one
    GEMM's), else from its output in the operands' dtype."""
    if out_dtype != torch.float32 or a.dtype == torch.float32 or _FLOAT32_OUT[0] is False:
        return grouped_mm(a, b, offs=offs).to(out_dtype)
    try:
        out = grouped_mm(a, b, offs=offs, out_dtype=torch.float32)
        _FLOAT32_OUT[0] = True
        return out
    except (RuntimeError, TypeError, NotImplementedError):
        if _FLOAT32_OUT[0]:
            raise
        _FLOAT32_OUT[0] = False
        return grouped_mm(a, b, offs=offs).to(out_dtype)

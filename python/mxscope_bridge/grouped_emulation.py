"""Emulated experts through the trainer's grouped GEMM: all experts of one parameter in one launch per
operand to quantize and one grouped product per GEMM, where the expert-by-expert way (experts.py
run_linear) takes three GEMMs and six quantizations per expert: 9.35× a plain bf16 step on a
Qwen3-MoE-shaped model, most of it the host launching ~10 kernels per expert.

- Fprop (X·Wᵀ) and Dgrad (∇Y·W) quantize along a model dimension, in blocks that never cross a row,
  so the routed rows of every expert are quantized at once, and so is every expert's weight.
- Wgrad (∇Yᵀ·X) reduces over each expert's own tokens, which the expert-by-expert way pads to whole
  blocks (rotation.py's "pad"). Here each expert's rows are copied to a start that is a multiple of
  the block, zeros between, so that no block holds two experts' tokens, and the grouped product
  sums each expert's padded stretch alone.

With nearest-even rounding and no rotation or a fixed Hadamard one, the operands' values are the
expert-by-expert way's bits. Stochastic rounding and random Hadamard signs are drawn as draws.py
draws them for any GEMM call, keyed to this call's operands (all experts' rows at once) and each
element's position in them: other bits than the expert-by-expert way's (which keys each expert's
own operands), drawn the same way, and the same bits again for the same operands (a checkpoint's
recompute). Every expert's two operands share the call's signs, so the rotation cancels in each
product. A fixed-sign Hadamard rotation (its signs restart at each expert's tokens), the block
formats of formats.py (scaled per operand) and a "skip" misfit (no rotation for some experts) run
expert by expert. The products are the grouped GEMM's: their float32 sums may be added in another
order than one GEMM per expert does, so a product can differ in its last bit."""
from __future__ import annotations

import itertools
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch

from . import mx_ops, mxfp4
from .capture import compute_dtype
from .draws import SALT_A, SALT_B, Draws
from .host_to_device import to_device
from .precision import uses_formats
from .rotation import Rotation, make_rotation, padded_length

#: Rotations whose transform is the same for every expert of a grouped call.
_GROUPED_ROTATIONS = ("none", "hadamard", "random-hadamard")


def groupable(gemm: dict, misfit: str) -> bool:
    """Whether a GEMM config's operands can be quantized for all experts at once (see above)."""
    if gemm["precision"] == "bf16":
        return True
    if gemm["precision"] != "mxfp4" or uses_formats(gemm) or gemm["rotation"] not in _GROUPED_ROTATIONS:
        return False
    # "skip" leaves the rotation out for an expert whose token count the block does not divide: Wgrad's
    # rotation would then differ from expert to expert.
    return gemm["rotation"] == "none" or misfit != "skip"


class _Call(NamedTuple):
    """One grouped GEMM call's config, compute dtype, name, rotation and random bits."""
    gemm: dict
    dtype: torch.dtype
    what: str
    rotation: Optional[Rotation]
    draws: Optional[Draws]


def _call(emulation, kind: str, what: str, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> _Call:
    """The call of GEMM `kind` on the 2-D operands a and b (reduction dim last), keyed to them."""
    gemm = emulation.gemms[kind]
    if gemm["precision"] == "bf16":
        return _Call(gemm, dtype, what, None, None)
    draws = emulation.random.draws(gemm, what, a, b)
    return _Call(gemm, dtype, what, make_rotation(gemm["rotation"], gemm["hadamardBlock"], a.shape[-1], a.device, draws, emulation.misfit), draws)


def _quantized(x: torch.Tensor, call: _Call, salt: int, row_major: bool = True, tiles: int = 1) -> torch.Tensor:
    """x [rows, K] as the GEMM consumes it in the call's dtype, row-major or laid out like x (K
    padded to the Hadamard block where the rotation pads), as capture.gemm_operands makes an
    operand: `salt` says which of the call's operands it is. tiles: x's K holds that many copies of
    the call's reduction dimension side by side (every expert's weight), each with the call's signs."""
    if call.gemm["precision"] == "bf16":
        values = x.to(torch.bfloat16).to(call.dtype)
        return values.contiguous() if row_major else values
    r = call.rotation
    if r is not None and r.signs is not None and tiles > 1:
        r = r._replace(signs=r.signs.repeat(tiles))
    values, _ = mx_ops.quantize_operand(x, call.gemm, r, call.draws.for_operand(salt), call.what, call.dtype, out_row_major=row_major)
    return values


def unsplit_stretch(gemm: dict) -> int:
    """The stretch of a reduction dimension that no block of the GEMM's operands crosses: the MXFP4
    block, or the Hadamard block where it is longer."""
    if gemm["precision"] == "bf16":
        return 1
    return max(mxfp4.BLOCK, gemm["hadamardBlock"] if gemm["rotation"] != "none" else 1)


def _weights_2d(b: torch.Tensor, gemm: dict) -> tuple:
    """The grouped GEMM's weights b [E, K, N] (a view of the experts' parameter) as one 2-D operand
    with its reduction dimension last, and how many experts' K that dimension holds. Where b is
    contiguous and whole blocks fill K, its experts side by side ([N, E·K], a view: no block crosses
    from one expert to the next); else [E·N, K], a view where b is a transposed one, a copy otherwise."""
    experts, k, n = b.shape
    if b.is_contiguous() and k % unsplit_stretch(gemm) == 0:
        return b.reshape(experts * k, n).t(), experts
    return b.transpose(1, 2).reshape(experts * n, k), 1


def _weights_quantized(w2d: torch.Tensor, tiles: int, shape: torch.Size, call: _Call) -> torch.Tensor:
    """_weights_2d's operand quantized, back as the grouped GEMM's [E, K(padded), N]."""
    experts, k, n = shape
    if tiles > 1:
        return _quantized(w2d, call, SALT_B, row_major=False, tiles=tiles).t().view(experts, k, n)
    return _quantized(w2d, call, SALT_B).view(experts, n, -1).transpose(1, 2)


def spread_experts(tensors: Sequence[torch.Tensor], counts: List[int], block: int) -> tuple:
    """Each of `tensors` ([Σcounts, n], one row per routed token) with each expert's rows starting at
    a multiple of `block`, zeros between; and the ends of the spread experts (int32, on the rows'
    device)."""
    padded = [padded_length(c, block) for c in counts]
    device = tensors[0].device
    ends = to_device(torch.tensor(padded, dtype=torch.int32).cumsum(0, dtype=torch.int32), device)
    if padded == counts:
        return list(tensors), ends
    rows, spread_rows = sum(counts), sum(padded)
    # Each expert's new start less its old one, per row, made on the rows' device from E numbers (an
    # index of every row built on the host came over from pageable memory, a copy that waits for the GPU).
    shifts = list(itertools.accumulate((p - c for p, c in zip(padded, counts)), initial=0))[:-1]
    per_row = torch.repeat_interleave(to_device(torch.tensor(shifts, dtype=torch.int64), device),
                                      to_device(torch.tensor(counts, dtype=torch.int64), device), output_size=rows)
    where = torch.arange(rows, device=device) + per_row
    spread = [t.new_zeros(spread_rows, t.shape[1]).index_copy_(0, where, t) for t in tensors]
    return spread, ends


class GroupedEmulatedExperts(torch.autograd.Function):
    """y = x · weights[e] for the rows [ends[e-1], ends[e]) of x, the three GEMMs emulated at
    `emulation.gemms`. x [rows, in]; weights [E, in, out], as the grouped GEMM takes them; rows past
    the last end get zeros, and no gradient."""

    @staticmethod
    def forward(ctx, x, weights, offs, ends: List[int], emulation, grouped_mm: Callable, what: str):
        dtype = compute_dtype(x)
        w2d, tiles = _weights_2d(weights, emulation.gemms["fprop"])
        call = _call(emulation, "fprop", f"{what} fprop", x, w2d, dtype)
        y = grouped_mm(_quantized(x, call, SALT_A), _weights_quantized(w2d, tiles, weights.shape, call), offs=offs)
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
        dy = dy.to(dtype)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            b = weights.transpose(1, 2)
            w2d, tiles = _weights_2d(b, emulation.gemms["dgrad"])
            call = _call(emulation, "dgrad", f"{what} dgrad", dy, w2d, dtype)
            dx = grouped_mm(_quantized(dy, call, SALT_A), _weights_quantized(w2d, tiles, b.shape, call), offs=offs)
            dx[ends[-1]:] = 0
            dx = dx.to(x_dtype)
        if ctx.needs_input_grad[1]:
            dw = _wgrad(dy[:ends[-1]], x[:ends[-1]].to(dtype), ends, emulation, dtype, grouped_mm, what, w_dtype, param_layout)
        return dx, dw, None, None, None, None, None


def _wgrad(dy: torch.Tensor, x: torch.Tensor, ends: List[int], emulation, dtype: torch.dtype,
           grouped_mm: Callable, what: str, out_dtype: torch.dtype, param_layout: bool) -> torch.Tensor:
    """[E, in, out] in `out_dtype`: expert e's Xᵀ·∇Y over its own tokens, both quantized along the
    tokens; with param_layout, the transpose of a contiguous [E, out, in]."""
    counts = [end - start for start, end in zip([0] + ends[:-1], ends)]
    block = unsplit_stretch(emulation.gemms["wgrad"])
    (dy, x), spread_ends = spread_experts((dy, x), counts, block)
    call = _call(emulation, "wgrad", f"{what} wgrad", dy.t(), x.t(), dtype)
    dyq = _quantized(dy.t(), call, SALT_A)  # [out, tokens]
    xq = _quantized(x.t(), call, SALT_B)  # [in, tokens]
    if param_layout:
        return _grouped_product(grouped_mm, dyq, xq.t(), spread_ends, out_dtype).transpose(1, 2)
    return _grouped_product(grouped_mm, xq, dyq.t(), spread_ends, out_dtype)


def equal_groups_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """The grouped GEMM for groups of one size (a bmm by all experts, as Llama 4 multiplies them), by
    torch.bmm: a [G·T, K] by b [G, K, N], or a [M, G·T] by b [G·T, N] split along G·T. Its outputs
    are in the operands' dtype: a float32 `out_dtype` gets them converted."""
    groups = offs.numel()
    if b.dim() == 3:
        out = torch.bmm(a.reshape(groups, -1, a.shape[1]), b).reshape(a.shape[0], b.shape[2])
    else:
        out = torch.bmm(a.reshape(a.shape[0], groups, -1).transpose(0, 1), b.reshape(groups, -1, b.shape[1]))
    return out if out_dtype is None else out.to(out_dtype)


#: (grouped GEMM, operand dtype) -> whether that GEMM gives float32 sums of such operands (absent: not tried yet)
_FLOAT32_SUMS: Dict[Tuple[Callable, torch.dtype], bool] = {}


def float32_sums(grouped_mm: Callable, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> Optional[torch.Tensor]:
    """The grouped product of a [m, K] and b [K, n] split along K as the grouped GEMM's float32 sums
    (as capture.mm_float32 gives one GEMM's), where it gives them for a's dtype: tried once per GEMM and
    dtype (torch's refuses a float32 output of bf16 operands on an H200, torch 2.11); else None."""
    key = (grouped_mm, a.dtype)
    works = _FLOAT32_SUMS.get(key)
    if works is False:
        return None
    try:
        out = grouped_mm(a, b, offs=offs) if a.dtype == torch.float32 else grouped_mm(a, b, offs=offs, out_dtype=torch.float32)
    except (RuntimeError, TypeError, NotImplementedError):
        if works:
            raise
        _FLOAT32_SUMS[key] = False
        return None
    _FLOAT32_SUMS[key] = True
    return out


def _grouped_product(grouped_mm: Callable, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The grouped product of a [m, K] and b [K, n] split along K, in `out_dtype`: float32 outputs
    are the grouped GEMM's float32 sums where it gives them, else its output in the operands' dtype."""
    out = float32_sums(grouped_mm, a, b, offs) if out_dtype == torch.float32 else None
    return out if out is not None else grouped_mm(a, b, offs=offs).to(out_dtype)

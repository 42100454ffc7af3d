"""Fake quantization of one GEMM operand at a GemmConfig's precision (fp32, bf16, fp8, mxfp4)."""
from __future__ import annotations

from typing import Optional

import torch

from . import mxfp4
from .rotation import rotate

from .protocol import PRECISIONS

# (mantissa bits, smallest normal exponent, largest finite value) of the OCP FP8 formats.
E4M3 = (3, -6, 448.0)
E5M2 = (2, -14, 57344.0)


def round_to_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def round_to_float(x: torch.Tensor, fmt: tuple) -> torch.Tensor:
    """Round float32 to a narrow float format (nearest-even, saturating, subnormals kept)."""
    mantissa_bits, min_exp, max_value = fmt
    _, e = torch.frexp(x)
    exponent = (e.to(torch.int32) - 1).clamp(min=min_exp)
    step = mxfp4.exp2_int(exponent - mantissa_bits)
    out = torch.round(x / step) * step
    return torch.where(torch.isfinite(x), out.clamp(-max_value, max_value), x)


def round_to_fp8(x: torch.Tensor, fmt: tuple) -> torch.Tensor:
    """Per-tensor power-of-two scaling so amax lands in the format's top binade, then FP8 rounding."""
    amax = x.abs().amax()
    if not torch.isfinite(amax) or amax == 0:
        return round_to_float(x, fmt)
    _, e_max = torch.frexp(torch.tensor(fmt[2]))
    _, e_amax = torch.frexp(amax)
    shift = (e_max.to(torch.int32) - e_amax.to(torch.int32) - 1).clamp(-126, 126)
    return round_to_float(x * mxfp4.exp2_int(shift), fmt) * mxfp4.exp2_int(-shift)


def quantize_operand(x: torch.Tensor, gemm: dict, is_gradient: bool, r: Optional[torch.Tensor], generator: Optional[torch.Generator], what: str) -> tuple:
    """The operand as the GEMM consumes it (float32) and, for mxfp4, its Quantized intermediates.

    `x` has the reduction dimension last; `r` is the GEMM's rotation (applied for mxfp4 only).
    """
    precision = gemm["precision"]
    if precision == "fp32":
        return x.to(torch.float32), None
    if precision == "bf16":
        return round_to_bf16(x.to(torch.float32)), None
    if precision == "fp8":
        return round_to_fp8(x.to(torch.float32), E5M2 if is_gradient else E4M3), None
    if precision == "mxfp4":
        q = mxfp4.quantize(rotate(x, r, what), gemm["rounding"], gemm["srPrescale"], generator)
        return q.values, q
    raise ValueError(f"{what}: precision {precision!r} is not one of {PRECISIONS}")

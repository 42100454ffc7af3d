"""Fake quantization of one GEMM operand at a GemmConfig's precision (fp32, bf16, fp8, mxfp4, nvfp4, mxfp8)."""
from __future__ import annotations

from typing import Optional

import torch

from . import formats, mxfp4
from .draws import Draws
from .rotation import rotate

from .protocol import PRECISIONS

#: Precisions quantized in blocks along the reduction dimension, where rotations act.
BLOCK_PRECISIONS = ("mxfp4", "nvfp4", "mxfp8")

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


def quantize_operand(x: torch.Tensor, gemm: dict, is_gradient: bool, r: Optional[torch.Tensor], draws: Optional[Draws], what: str,
                     is_weight: bool = False) -> tuple:
    """The operand as the GEMM consumes it (float32) and, for mxfp4 with the floor scale rule, its
    Quantized intermediates (quantize_in_format gives the other block formats' stats).

    `x` has the reduction dimension last; `r` is the GEMM's rotation (applied for block precisions).
    `is_weight` selects NVFP4's 16x16 tiles when the GEMM asks for them (nvfp4Weight2d).
    """
    precision = gemm["precision"]
    if precision == "fp32":
        return x.to(torch.float32), None
    if precision == "bf16":
        return round_to_bf16(x.to(torch.float32)), None
    if precision == "fp8":
        return round_to_fp8(x.to(torch.float32), E5M2 if is_gradient else E4M3), None
    if precision == "mxfp4" and gemm.get("scaleRule", "floor") == "floor":
        q = mxfp4.quantize(rotate(x, r, what), gemm["rounding"], gemm["srPrescale"], draws)
        return q.values, q
    if precision in BLOCK_PRECISIONS:
        return quantize_in_format(x, gemm, is_gradient, r, what, is_weight)[0], None
    raise ValueError(f"{what}: precision {precision!r} is not one of {PRECISIONS}")


def uses_formats(gemm: dict) -> bool:
    """Whether the GEMM's block format goes through formats.py (NVFP4, MXFP8, MXFP4 under a scale
    rule other than floor) rather than mxfp4.py / mx_ops (MXFP4 with the floor rule)."""
    return gemm["precision"] in ("nvfp4", "mxfp8") or (gemm["precision"] == "mxfp4" and gemm.get("scaleRule", "floor") != "floor")


def quantize_in_format(x: torch.Tensor, gemm: dict, is_gradient: bool, r: Optional[torch.Tensor], what: str, is_weight: bool = False,
                       with_stats: bool = False, tensor_amax: Optional[torch.Tensor] = None) -> tuple:
    """(float32 values, OperandSums with with_stats) of `x` (reduction dim last) rotated by `r` and
    quantized in the GEMM's formats.py format (`uses_formats`): MXFP8 in E5M2 for gradients and E4M3
    otherwise, NVFP4 in 16x16 tiles for a weight when the GEMM asks (nvfp4Weight2d). `tensor_amax`:
    NVFP4's tensor amax when `x` is one chunk of the operand."""
    precision = gemm["precision"]
    rule = gemm.get("scaleRule", "floor")
    rotated = rotate(x, r, what)
    if precision == "mxfp4":
        if gemm["rounding"] != "nearest-even" or gemm["srPrescale"]:
            raise ValueError(f"{what}: scale rule {rule!r} is implemented with nearest-even rounding only; set scaleRule to floor or rounding to nearest-even")
        q = formats.mxfp4_scale_rule_quantize(rotated, rule, with_stats)
    elif precision == "mxfp8":
        q = formats.quantize_mxfp8(rotated, "e5m2" if is_gradient else "e4m3", rule, with_stats)
    else:
        q = formats.quantize_nvfp4(rotated, bool(gemm.get("nvfp4Weight2d")) and is_weight, with_stats, tensor_amax)
    return q.values, q.sums

"""OperandSums (stats.py's layout) of a quantization in formats.py: MXFP8, NVFP4, and MXFP4 under a
scale rule other than floor. The histogram counts the scale codes actually stored, once per stored
scale (an NVFP4 16x16 tile counts once): E8M0 exponents for the MX formats, E4M3 codes for NVFP4
(bin = code, so the record's minExp is a code). The sums carry the record's format and block size.
"""
from __future__ import annotations

import torch

from . import mxfp4, stats

#: E4M3's NaN code: the scale of an NVFP4 block that held NaN or +-Inf.
E4M3_NAN_CODE = 0x7F


def e8m0_bins(scale_bytes: torch.Tensor) -> torch.Tensor:
    """histc values of E8M0 bytes: the unbiased exponent; byte 0xFF (NaN) lands on stats.NAN_EXP."""
    return scale_bytes.to(torch.float32) - 127


def e4m3_bins(codes: torch.Tensor) -> torch.Tensor:
    """histc values of E4M3 scale codes: bin i of the histogram counts code i; the NaN code goes to the NaN bin."""
    bins = codes.to(torch.float32) + mxfp4.SCALE_MIN_EXP
    return torch.where(codes == E4M3_NAN_CODE, torch.full_like(bins, stats.NAN_EXP), bins)


def block_sums(inputs: torch.Tensor, outputs: torch.Tensor, saturated: torch.Tensor, elements: int, bins: torch.Tensor,
               fmt: str, block_size: int) -> stats.OperandSums:
    """`inputs`, `outputs`: the quantizer's input and fake-quantized output, zero-padded alike to whole
    blocks; `saturated`: how many elements rounded past the element format's max; `bins`: one histc
    value per stored scale (e8m0_bins, e4m3_bins); `elements`: the real (unpadded) element count."""
    zero_inputs = inputs == 0
    counts = torch.stack([zero_inputs.sum(), (zero_inputs | (outputs == 0)).sum(), saturated.sum()]).to(torch.float64)
    energies = torch.stack([(inputs * inputs).sum(dtype=torch.float64), (inputs - outputs).square().sum(dtype=torch.float64)])
    hist = torch.histc(bins, bins=mxfp4.HIST_BINS + 1, min=mxfp4.SCALE_MIN_EXP, max=stats.NAN_EXP + 1)
    return stats.OperandSums(elements, inputs.numel(), counts, energies, hist, fmt, block_size)

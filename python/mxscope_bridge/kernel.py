"""Operands quantized by a trainer's own MXFP4 kernel, turned into the bridge's block form so the
histograms and saturation describe the scales that kernel really used.

A kernel hands over, for one operand of one GEMM (reduction dimension last, 32-element blocks):
the E8M0 scale bytes (uint8, or torch.float8_e8m0fnu where torch has it) and either the FP4 E2M1
codes (one per byte, or packed two per byte) or the dequantized values. With the high-precision
tensor the kernel quantized (`original`: after any rotation the kernel applied), saturation,
flushing and SQNR are exact for the kernel's scales; without it the stats know only the codes:
`saturatedFrac` then counts elements at the top code ±6 (every clamped element is one, so it is an
upper bound), `flushedFrac` is 0 and `sqnrDb` null.
"""
from __future__ import annotations

from typing import Optional

import torch

from . import mxfp4

#: E2M1 magnitudes by the low three bits of a code; bit 3 is the sign.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E8M0_BIAS = 127
E8M0_NAN = 0xFF
NIBBLE_ORDERS = ("low-first", "high-first")


def scale_bytes(scale: torch.Tensor) -> torch.Tensor:
    """E8M0 scales as uint8 bytes: from uint8, or from float8_e8m0fnu (torch >= 2.7) bit for bit."""
    if scale.dtype == torch.uint8:
        return scale
    if str(scale.dtype) == "torch.float8_e8m0fnu":
        return scale.view(torch.uint8)
    raise ValueError(f"E8M0 scales must be uint8 bytes or float8_e8m0fnu, got {scale.dtype}")


def unpack_fp4(packed: torch.Tensor, nibble_order: str = "low-first") -> torch.Tensor:
    """Two FP4 codes per byte -> one per byte; `low-first`: the first element in the low nibble
    (torch.float4_e2m1fn_x2 and current torchao), `high-first`: in the high nibble (older code)."""
    if nibble_order not in NIBBLE_ORDERS:
        raise ValueError(f"nibble_order {nibble_order!r} is not one of {', '.join(NIBBLE_ORDERS)}")
    if packed.dtype != torch.uint8:
        packed = packed.view(torch.uint8)
    low, high = packed & 0x0F, packed >> 4
    pair = (low, high) if nibble_order == "low-first" else (high, low)
    return torch.stack(pair, dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def pack_fp4(codes: torch.Tensor, nibble_order: str = "low-first") -> torch.Tensor:
    """The inverse of unpack_fp4 (an even number of codes along the last axis)."""
    if codes.shape[-1] % 2:
        raise ValueError(f"packing FP4 codes needs an even last dimension, got {codes.shape[-1]}")
    first, second = codes[..., 0::2], codes[..., 1::2]
    return (first | second << 4) if nibble_order == "low-first" else (first << 4 | second)


def codes_of(q: mxfp4.Quantized, length: int) -> torch.Tensor:
    """The FP4 E2M1 codes (one per byte, [rows, length]) of an operand our quantizer wrote."""
    magnitude = (q.deq_blocks.abs() * mxfp4.exp2_int(-q.shared_exp)[:, None]).nan_to_num(0.0)
    index = (magnitude[..., None] == torch.tensor(E2M1_VALUES, device=magnitude.device)).to(torch.uint8).argmax(dim=-1).to(torch.uint8)
    codes = index | (torch.signbit(q.deq_blocks).to(torch.uint8) << 3)
    return codes.reshape(-1, -(-length // mxfp4.BLOCK) * mxfp4.BLOCK)[:, :length]


def kernel_quantized(scale: torch.Tensor, codes: Optional[torch.Tensor] = None, values: Optional[torch.Tensor] = None,
                     original: Optional[torch.Tensor] = None, block_size: int = mxfp4.BLOCK, length: Optional[int] = None,
                     packed: bool = False, nibble_order: str = "low-first", what: str = "kernel operand") -> mxfp4.Quantized:
    """A kernel's quantized operand as mxfp4.Quantized (the form stats.operand_sums reads).

    scale: E8M0 bytes, one per block, any shape holding rows × ceil(length/32) values in row-major
    order; codes: FP4 codes [..., length] (or [..., length/2] with packed=True) or values: the
    dequantized tensor [..., length]; original: the high-precision tensor that was quantized.
    """
    if block_size != mxfp4.BLOCK:
        raise ValueError(f"{what}: MX block size {block_size} is not {mxfp4.BLOCK}: the stats count 32-element blocks (MXFP4)")
    if (codes is None) == (values is None):
        raise ValueError(f"{what}: pass exactly one of codes= (FP4 E2M1 codes) or values= (the dequantized tensor)")
    if codes is not None:
        codes = unpack_fp4(codes, nibble_order) if packed else codes.to(torch.uint8)
        n = length or codes.shape[-1]
        codes = codes.reshape(-1, codes.shape[-1])[:, :n]
    else:
        n = length or values.shape[-1]
        values = values.reshape(-1, values.shape[-1]).to(torch.float32)
    rows = (codes if codes is not None else values).shape[0]
    per_row = -(-n // mxfp4.BLOCK)
    raw = scale_bytes(scale).reshape(-1)
    if raw.numel() != rows * per_row:
        raise ValueError(f"{what}: {raw.numel()} scales for {rows} rows of {n} elements; expected {rows * per_row} (one per {mxfp4.BLOCK}-element block)")
    nan_block = raw == E8M0_NAN
    shared = raw.to(torch.int32) - E8M0_BIAS
    pad = per_row * mxfp4.BLOCK - n

    def blocks_of(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (0, pad)).reshape(-1, mxfp4.BLOCK) if pad else x.reshape(-1, mxfp4.BLOCK)

    unit = mxfp4.exp2_int(shared.clamp(min=mxfp4.SCALE_MIN_EXP, max=mxfp4.SCALE_MAX_EXP))[:, None]
    if codes is not None:
        code_blocks = blocks_of(codes.to(torch.int64))
        grid = torch.tensor(E2M1_VALUES, device=code_blocks.device)[code_blocks & 7]
        signed = torch.where(code_blocks >= 8, -grid, grid)
        deq = signed * unit
    else:
        deq = blocks_of(values)
        grid = (deq.abs() / unit).nan_to_num(0.0)
        on_grid = (grid[..., None] == torch.tensor(E2M1_VALUES, device=grid.device)).any(dim=-1) | nan_block[:, None]
        if not bool(on_grid.all()):
            raise ValueError(f"{what}: values are not MXFP4 values under these scales (an element is off the E2M1 grid); pass codes= or the matching scales")
    deq = torch.where(nan_block[:, None], torch.full_like(deq, float("nan")), deq)
    if original is not None:
        source = blocks_of(original.reshape(-1, original.shape[-1]).to(torch.float32))
        if source.shape != deq.shape:
            raise ValueError(f"{what}: original has shape {tuple(original.shape)}, which does not match the quantized operand")
        # The kernel's scale decides saturation: an element whose rounding passes 6 was clamped.
        grid = torch.where(mxfp4._round_nearest_even((source.abs() / unit).nan_to_num(0.0)) > mxfp4.E2M1_MAX, torch.full_like(grid, 8.0), grid)
    else:
        source = torch.where(nan_block[:, None], torch.zeros_like(deq), deq)
        grid = torch.where(grid >= mxfp4.E2M1_MAX, torch.full_like(grid, 8.0), grid)
    values_out = deq.reshape(rows, -1)[:, :n]
    return mxfp4.Quantized(values_out, rows * n, source, deq, shared.clamp(min=mxfp4.SCALE_MIN_EXP, max=mxfp4.SCALE_MAX_EXP), nan_block, grid)


def from_mx_tensor(t) -> dict:
    """Keyword arguments for kernel_quantized from a torchao MXTensor (or anything with its layout):
    `qdata` / `scale` / `elem_dtype` / `block_size`, or the older `_data` / `_scale_e8m0` /
    `_elem_dtype` / `_block_size`. FP4 elements are packed two per byte (low nibble first)."""
    def attr(*names):
        for name in names:
            value = getattr(t, name, None)
            if value is not None:
                return value
        raise ValueError(f"{type(t).__name__} has none of {', '.join(names)}: not an MXTensor layout")
    data, scale = attr("qdata", "_data"), attr("scale", "_scale_e8m0")
    elem, block = attr("elem_dtype", "_elem_dtype"), int(attr("block_size", "_block_size"))
    name = str(elem).replace("torch.", "")
    if name not in ("float4_e2m1fn_x2", "fp4_e2m1", "float4_e2m1"):
        raise ValueError(f"MXTensor elements are {name}: the bridge reads MXFP4 (FP4 E2M1) elements only")
    return {"scale": scale, "codes": data, "block_size": block, "packed": True}

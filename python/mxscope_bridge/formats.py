"""The production FP4/FP8 recipes beside MXFP4 (docs/numerics.md): the MX scale rules, MXFP8 and
NVFP4, and the fixed sign vectors of `fixed-sign-hadamard`. Torch only (CPU or GPU), float32 tensor
operations in the order the definitions give, so the results are bit-identical to src/mx and to
the golden vectors in test/mx/recipes-golden.

- MX scale rules (E8M0): `floor` floor(log2 amax) - emax (OCP); `even` amax rounded (half up) to the
  element's mantissa width, then floor; `rceil` ceil(log2(float32(amax / max))). All clamp to
  [-127, 127]; a block holding NaN or +-Inf gets the NaN scale 0xFF.
- MXFP8: E4M3 or E5M2 elements, blocks of 32, nearest-even, saturating at the format's max.
- NVFP4: E2M1 elements, blocks of 16 (or 16x16 tiles), an E4M3 scale per block, an FP32 scale per
  tensor, following TransformerEngine's pure-Python reference quantizer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from . import format_stats
from .mxfp4 import exp2_int
from .stats import OperandSums

SCALE_RULES = ("floor", "rceil", "even")
FLT_MAX = torch.finfo(torch.float32).max
NVFP4_BLOCK = 16
MX_BLOCK = 32
#: TransformerEngine's hard-coded Wgrad sign vector (get_wgrad_sign_vector), bit i of 0xD7E8 = entry i is -1.
TE_WGRAD_SIGNS_16 = tuple(-1.0 if (0xD7E8 >> i) & 1 else 1.0 for i in range(16))


@dataclass(frozen=True)
class Element:
    """A small float format: explicit mantissa bits, smallest normal exponent, largest value, floor(log2 max)."""

    name: str
    mbits: int
    emin: int
    max: float
    emax: int


E2M1 = Element("e2m1", 1, 0, 6.0, 2)
E4M3 = Element("e4m3", 3, -6, 448.0, 8)
E5M2 = Element("e5m2", 2, -14, 57344.0, 15)
FP8_ELEMENTS = {"e4m3": E4M3, "e5m2": E5M2}


def check_scale_rule(rule: str) -> str:
    if rule not in SCALE_RULES:
        raise ValueError(f"scale rule {rule!r} is not one of {', '.join(SCALE_RULES)}")
    return rule


def _magnitude_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32) & 0x7FFFFFFF


def mx_shared_exponents(amax_bits: torch.Tensor, rule: str, element: Element) -> torch.Tensor:
    """Unbiased E8M0 exponent (int32) per block from the float32 bits of its |amax|; meaningless where
    the amax is NaN or +-Inf (exponent field 255)."""
    check_scale_rule(rule)
    field = amax_bits >> 23
    if rule == "floor":
        unbiased = field - 127 - element.emax
    elif rule == "even":
        unbiased = ((amax_bits + (1 << (22 - element.mbits))) >> 23) - 127 - element.emax
    else:
        d = amax_bits.view(torch.float32) / element.max  # one float32 division
        bits = d.view(torch.int32)
        d_field = bits >> 23
        mantissa = bits & 0x7FFFFF
        normal = d_field - 127 + (mantissa != 0).to(torch.int32)
        # A subnormal d is mantissa * 2^-149: ceil(log2 d) = ceil(log2 mantissa) - 149.
        _, e = torch.frexp((mantissa - 1).clamp(min=0).to(torch.float64))
        subnormal = torch.where(mantissa > 1, e.to(torch.int32), torch.zeros_like(e, dtype=torch.int32)) - 149
        subnormal = torch.where(mantissa == 0, torch.full_like(subnormal, -127), subnormal)
        unbiased = torch.where(d_field == 0, subnormal, normal)
    return unbiased.clamp(-127, 127).to(torch.int32)


def round_to_element(a: torch.Tensor, element: Element) -> torch.Tensor:
    """Nearest value of the element grid to a >= 0 (ties to even), NOT saturated; float32."""
    _, e = torch.frexp(a)
    exponent = (e.to(torch.int32) - 1).clamp(min=element.emin)
    step = exp2_int(exponent - element.mbits)
    return torch.round(a / step) * step


def fp8_codes(sign: torch.Tensor, v: torch.Tensor, element: Element) -> torch.Tensor:
    """FP8 code (int32) of +-v for v on the element grid (finite, <= max); `sign` is bool."""
    _, e = torch.frexp(v)
    exponent = e.to(torch.int32) - 1
    bias = 1 - element.emin
    normal = ((exponent + bias) << element.mbits) | (v / exp2_int(exponent - element.mbits) - (1 << element.mbits)).to(torch.int32)
    subnormal = (v / exp2_int(torch.full_like(exponent, element.emin - element.mbits))).to(torch.int32)
    code = torch.where(exponent < element.emin, subnormal, normal)
    code = torch.where(v == 0, torch.zeros_like(code), code)
    return code | (sign.to(torch.int32) << 7)


@dataclass
class BlockQuantized:
    """A block-quantized tensor: fake-quantized values (the input's shape) and what was stored."""

    values: torch.Tensor
    #: [n_blocks] E8M0 bytes (MX) or E4M3 codes (NVFP4), int32, per row and block (tiles repeat theirs)
    scales: torch.Tensor
    #: element codes, the input's shape (int32)
    codes: torch.Tensor
    #: elements that rounded past the element format's max and were clamped
    saturated: int
    #: NVFP4 only: the tensor's finite amax and decode scale S_dec
    amax: Optional[torch.Tensor] = None
    tensor_scale: Optional[torch.Tensor] = None
    #: with_stats: what the quantization did, for the operand's stats record (format_stats.py)
    sums: Optional[OperandSums] = None


def _rows_of_blocks(x: torch.Tensor, block: int):
    n = x.shape[-1] if x.dim() > 0 else 1
    rows = x.to(torch.float32).reshape(-1, n)
    pad = (-n) % block
    if pad:
        rows = torch.nn.functional.pad(rows, (0, pad))
    return rows.reshape(-1, block), n, pad


def _unblock(blocks: torch.Tensor, shape, n: int, pad: int) -> torch.Tensor:
    return blocks.reshape(-1, n + pad)[:, :n].reshape(shape)


def quantize_mxfp8(x: torch.Tensor, fmt: str = "e4m3", scale_rule: str = "floor", with_stats: bool = False) -> BlockQuantized:
    """MXFP8 along the last axis in 32-element blocks (a partial last block is zero-padded)."""
    if fmt not in FP8_ELEMENTS:
        raise ValueError(f"MXFP8 element format {fmt!r} is not one of e4m3, e5m2")
    element = FP8_ELEMENTS[fmt]
    blocks, n, pad = _rows_of_blocks(x, MX_BLOCK)
    amax_bits = _magnitude_bits(blocks).amax(dim=1)
    nan_block = (amax_bits >> 23) == 255
    shared = mx_shared_exponents(amax_bits, scale_rule, element)
    negative = blocks.view(torch.int32) < 0
    rounded = round_to_element(blocks.abs() * exp2_int(-shared)[:, None], element)
    saturated = (rounded > element.max) & ~nan_block[:, None]
    v = rounded.clamp(max=element.max)
    signed = torch.where(negative, -v, v)
    out = signed * exp2_int(shared)[:, None]
    out = torch.where(nan_block[:, None], torch.full_like(out, float("nan")), out)
    codes = torch.where(nan_block[:, None], torch.full_like(shared[:, None], 0x7F), fp8_codes(negative, torch.where(nan_block[:, None], torch.zeros_like(v), v), element))
    scales = torch.where(nan_block, torch.full_like(shared, 255), shared + 127)
    sums = format_stats.block_sums(blocks, out, saturated, x.numel(), format_stats.e8m0_bins(scales), f"mxfp8-{fmt}", MX_BLOCK) if with_stats else None
    return BlockQuantized(_unblock(out, x.shape, n, pad), scales, _unblock(codes, x.shape, n, pad), int(saturated.sum()), sums=sums)


def mxfp4_scale_rule_quantize(x: torch.Tensor, scale_rule: str = "floor", with_stats: bool = False) -> BlockQuantized:
    """MXFP4 (nearest-even) with a scale rule; `floor` equals mxfp4.quantize."""
    blocks, n, pad = _rows_of_blocks(x, MX_BLOCK)
    amax_bits = _magnitude_bits(blocks).amax(dim=1)
    nan_block = (amax_bits >> 23) == 255
    shared = mx_shared_exponents(amax_bits, scale_rule, E2M1)
    scaled = blocks * exp2_int(-shared)[:, None]
    rounded = round_to_element(scaled.abs(), E2M1)
    saturated = (rounded > E2M1.max) & ~nan_block[:, None]
    v = rounded.clamp(max=E2M1.max)
    # microxcaling's zero sign: set only when x < 0 and float32(|x| / 2^shared) is not zero.
    negative = scaled < 0
    out = torch.where(negative, -v, v) * exp2_int(shared)[:, None]
    out = torch.where(nan_block[:, None], torch.full_like(out, float("nan")), out)
    index = _e2m1_index(v)
    codes = torch.where(nan_block[:, None], torch.zeros_like(index), index | (negative.to(torch.int32) << 3))
    scales = torch.where(nan_block, torch.full_like(shared, 255), shared + 127)
    sums = format_stats.block_sums(blocks, out, saturated, x.numel(), format_stats.e8m0_bins(scales), "mxfp4", MX_BLOCK) if with_stats else None
    return BlockQuantized(_unblock(out, x.shape, n, pad), scales, _unblock(codes, x.shape, n, pad), int(saturated.sum()), sums=sums)


_E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _e2m1_index(v: torch.Tensor) -> torch.Tensor:
    """Index of an E2M1 grid magnitude."""
    return torch.bucketize(v.contiguous(), _E2M1_VALUES.to(v.device)).to(torch.int32)


def _nvfp4_index(a: torch.Tensor) -> torch.Tensor:
    """E2M1 index of a scaled magnitude in [0, 6], nearest with ties to even (the reference's thresholds)."""
    index = torch.zeros_like(a, dtype=torch.int32)
    for threshold, inclusive in ((0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True), (3.5, False), (5.0, True)):
        index += (a > threshold if inclusive else a >= threshold).to(torch.int32)
    return index


def nvfp4_tensor_scales(amax: torch.Tensor):
    """(S_enc, S_dec) float32 from the tensor's finite amax."""
    encode = torch.tensor(448.0 * 6.0, dtype=torch.float32, device=amax.device) / amax
    encode = torch.where(torch.isinf(encode), torch.full_like(encode, FLT_MAX), encode)
    encode = torch.where(encode == 0, torch.ones_like(encode), encode)
    return encode, torch.ones_like(encode) / encode


def finite_amax(x: torch.Tensor) -> torch.Tensor:
    """The largest finite |x| (float32 scalar; 0 for an empty or all-non-finite tensor): NVFP4's tensor amax."""
    x = x.to(torch.float32)
    return torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x)).amax() if x.numel() else torch.tensor(0.0)


def quantize_nvfp4(x: torch.Tensor, tile2d: bool = False, with_stats: bool = False, tensor_amax: Optional[torch.Tensor] = None) -> BlockQuantized:
    """NVFP4 along the last axis of a tensor viewed as [rows, n]: 1x16 blocks, or 16x16 tiles.
    `tensor_amax`: the finite amax of the whole tensor when `x` is one chunk of it (the per-tensor
    scale belongs to the tensor, not to the chunk); by default x's own."""
    n = x.shape[-1] if x.dim() > 0 else 1
    rows = x.to(torch.float32).reshape(-1, n)
    m = rows.shape[0]
    tile = NVFP4_BLOCK if tile2d else 1
    padded = torch.nn.functional.pad(rows, (0, (-n) % NVFP4_BLOCK, 0, (-m) % tile))
    pm, pn = padded.shape
    amax = finite_amax(rows) if tensor_amax is None else tensor_amax.to(torch.float32)
    s_enc, s_dec = nvfp4_tensor_scales(amax)
    # [tiles_r, tile, blocks_c, 16] -> per-tile amax and finiteness
    grid = padded.reshape(pm // tile, tile, pn // NVFP4_BLOCK, NVFP4_BLOCK)
    nan_tile = ~torch.isfinite(grid).all(dim=3).all(dim=1)
    tile_amax = torch.where(torch.isfinite(grid), grid.abs(), torch.zeros_like(grid)).amax(dim=3).amax(dim=1)
    one_sixth = torch.reciprocal(torch.tensor(6.0, dtype=torch.float32, device=s_enc.device))
    ds = tile_amax * (s_enc * one_sixth)  # E2M1's reciprocal folded into the tensor scale, as the reference does
    ds = torch.where(ds > 448.0, torch.full_like(ds, 448.0), ds)  # also +Inf
    scale = round_to_element(ds, E4M3)
    denom = scale * s_dec
    encode = torch.ones_like(denom) / denom
    encode = torch.where(torch.isinf(encode), torch.full_like(encode, FLT_MAX), encode)
    scaled = grid * encode[:, None, :, None]
    magnitude = scaled.abs()
    saturated = (magnitude >= 7) & ~nan_tile[:, None, :, None]
    index = _nvfp4_index(magnitude.clamp(max=6.0))
    negative = scaled < 0
    e2m1 = _E2M1_VALUES.to(x.device)[index.long()]
    out = torch.where(negative, -e2m1, e2m1) * scale[:, None, :, None] * s_dec
    out = torch.where(nan_tile[:, None, :, None], torch.full_like(out, float("nan")), out)
    codes = torch.where(nan_tile[:, None, :, None], torch.zeros_like(index), index | (negative.to(torch.int32) << 3))
    scale_codes = torch.where(nan_tile, torch.full_like(index[:, 0, :, 0], 0x7F), fp8_codes(torch.zeros_like(scale, dtype=torch.bool), scale, E4M3))
    per_row_scales = scale_codes[:, None, :].expand(-1, tile, -1).reshape(pm, -1)[:m]
    real = torch.zeros(pm, pn, dtype=torch.bool, device=x.device)
    real[:m, :n] = True
    real_saturated = saturated.reshape(pm, pn) & real
    sums = format_stats.block_sums(padded, out.reshape(pm, pn), real_saturated, x.numel(), format_stats.e4m3_bins(scale_codes), "nvfp4",
                                   NVFP4_BLOCK * tile) if with_stats else None
    return BlockQuantized(
        values=out.reshape(pm, pn)[:m, :n].reshape(x.shape),
        scales=per_row_scales.reshape(-1),
        codes=codes.reshape(pm, pn)[:m, :n].reshape(x.shape),
        saturated=int(real_saturated.sum()),
        amax=amax,
        tensor_scale=s_dec,
        sums=sums,
    )


_fixed_sign_cache: dict = {}


def fixed_signs(block: int, length: int, seed: int, device: torch.device) -> torch.Tensor:
    """The `fixed-sign-hadamard` signs along a reduction dimension of `length`: one vector of the
    block size, fixed for the run and tiled along the axis. Block 16 uses TransformerEngine's vector;
    other blocks draw theirs once from `seed` (torch's generator: not the TypeScript trainer's bits)."""
    if length % block:
        raise ValueError(f"fixed-sign Hadamard: reduction dimension {length} is not a multiple of the Hadamard block {block}")
    key = (block, length, seed, str(device))
    if key not in _fixed_sign_cache:
        if block == 16:
            vector = torch.tensor(TE_WGRAD_SIGNS_16, dtype=torch.float32)
        else:
            generator = torch.Generator().manual_seed(seed)
            vector = torch.randint(0, 2, (block,), generator=generator).to(torch.float32) * 2 - 1
        _fixed_sign_cache[key] = vector.repeat(length // block).to(device)
    return _fixed_sign_cache[key]

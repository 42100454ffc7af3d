"""Fused MXFP4 on CUDA through Triton: rotate -> quantize -> dequantize (-> operand stats) in one pass.

Bit-identical to the torch path (`rotation.rotate` then `mxfp4.quantize`), which stays the CPU path
and the reference: the same float32 operations in the same order (sign and 1/√b scale, butterflies
with strides 1, 2, 4, …, the exponent from the amax's bits, ties-to-even or stochastic rounding with
the torch path's uniforms, hashed in place (draws.py), the same clamp and signed zeros). Floating-point
contraction is off so that no multiply and add fuse into an FMA.

An operand is a logical [rows, K] matrix quantized in 32-element blocks along K, read through two
strides: `blocks along the last axis` of a row-major tensor (K contiguous), or along its first axis
(the transposed operand of a Wgrad GEMM or the Wᵀ of a Dgrad GEMM, without a transposed copy).
The stats are the torch path's: zero inputs, zero codes and saturated codes over the zero-padded
blocks, and the histogram of shared exponents, all exact integers; signal and noise energies are
float64 sums of float32 squares, summed in another order (equal to about 1e-15, relative).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Tuple

import torch

try:  # Triton ships with CUDA builds of PyTorch; without it the torch path runs.
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice

    from .hash_kernels import element_bits, uniform
except ImportError:  # pragma: no cover - depends on the install
    triton = None

from . import mxfp4, mxfp4_gluon
from .draws import SALT_SIGNS, SAMPLE, Draws, keyed, salt_word
from .rotation import hadamard_norm
from .triton_launch import Relauncher

BLOCK = mxfp4.BLOCK
#: One operand's stats row (float64): zero inputs, zero codes, saturated, signal energy, noise energy,
#: then the HIST_BINS + 1 histogram bins. Kernels add into it atomically (energies thus sum in no fixed order).
STATS_COUNTS = 3
STATS_ENERGIES = 2
STATS_HIST = STATS_COUNTS + STATS_ENERGIES
STATS_LEN = STATS_HIST + mxfp4.HIST_BINS + 1


def available(x: torch.Tensor) -> bool:
    return triton is not None and x.is_cuda


if triton is not None:

    @triton.jit
    def _butterfly(x, ROWS: tl.constexpr, COLS: tl.constexpr, H: tl.constexpr):
        # One stage of the Walsh-Hadamard transform along axis 1: (x[j], x[j+H]) -> (x[j]+x[j+H], x[j]-x[j+H]).
        y = tl.permute(tl.reshape(x, (ROWS, COLS // (2 * H), 2, H)), (0, 1, 3, 2))
        a, b = tl.split(y)
        y = tl.permute(tl.join(a + b, a - b), (0, 1, 3, 2))
        return tl.reshape(y, (ROWS, COLS))

    @triton.jit
    def _exp2(e):
        # 2**e as float32 for integer e in [-149, 127], from the IEEE bits (subnormals too), like mxfp4.exp2_int.
        normal = (tl.maximum(e + 127, 0) << 23)
        subnormal = tl.full(e.shape, 1, tl.int32) << tl.minimum(tl.maximum(e + 149, 0), 22)
        return tl.where(e >= -126, normal, subnormal).to(tl.float32, bitcast=True)

    @triton.jit
    def _key_words(key_ptr, salt):
        # The key's two words as uint32, the second with the operand's salt word added (draws.element_bits).
        k0 = tl.load(key_ptr)
        k1 = tl.load(key_ptr + 1)
        return (k0 & 0xFFFFFFFF).to(tl.uint32), ((k1 + salt) & 0xFFFFFFFF).to(tl.uint32)

    @triton.jit
    def _mix64(x):
        # draws.mix on int64 holding 32-bit values (the key's arithmetic, as the torch path does it).
        x = x ^ (x >> 16)
        x = (x * 0x21F0AAAD) & 0xFFFFFFFF
        x = x ^ (x >> 15)
        x = (x * 0x735A2D97) & 0xFFFFFFFF
        return x ^ (x >> 15)

    @triton.jit
    def _sample_sum(ptr, stride_r, stride_c, R, C, NR, NC, first, WIDE: tl.constexpr, S: tl.constexpr):
        # draws._sample_sum: NR x NC elements spread over the operand, their bits hashed with their position, summed.
        i = tl.arange(0, S)
        j = tl.arange(0, S)
        rows = (i.to(tl.int64) * R) // NR
        cols = (j.to(tl.int64) * C) // NC
        m = (i < NR)[:, None] & (j < NC)[None, :]
        v = tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=m, other=0.0)
        if WIDE:
            bits = v.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
        else:
            bits = v.to(tl.int16, bitcast=True).to(tl.int64) & 0xFFFF
        position = (((i[:, None] * NC + j[None, :]).to(tl.int64) + first) * 0x9E3779B9) & 0xFFFFFFFF
        return tl.sum(tl.sum(tl.where(m, _mix64(bits ^ position), 0), axis=1), axis=0)

    # Every integer argument varies with the operand's shape and name: none is specialized on (one compile).
    @triton.jit(do_not_specialize=["a_stride_r", "a_stride_c", "a_rows", "a_cols", "a_nr", "a_nc", "b_stride_r", "b_stride_c", "b_rows", "b_cols",
                                   "b_nr", "b_nc", "s0", "s1", "n_signs", "signs_salt"])
    def _key_kernel(a_ptr, a_stride_r, a_stride_c, a_rows, a_cols, a_nr, a_nc, b_ptr, b_stride_r, b_stride_c, b_rows, b_cols, b_nr, b_nc,
                    s0, s1, key_ptr, signs_ptr, n_signs, signs_salt,
                    WIDE_A: tl.constexpr, HAS_B: tl.constexpr, WIDE_B: tl.constexpr, S: tl.constexpr, SIGNS: tl.constexpr, BLOCK_N: tl.constexpr):
        # draws.key_and_signs: the content, the key words and (SIGNS) the key's random signs.
        content = _sample_sum(a_ptr, a_stride_r, a_stride_c, a_rows, a_cols, a_nr, a_nc, 0, WIDE_A, S)
        if HAS_B:
            content += _sample_sum(b_ptr, b_stride_r, b_stride_c, b_rows, b_cols, b_nr, b_nc, S * S, WIDE_B, S)
        k0 = _mix64((content & 0xFFFFFFFF) ^ s0)
        k1 = _mix64(k0 ^ s1)
        tl.store(key_ptr, k0)
        tl.store(key_ptr + 1, k1)
        if SIGNS:  # draws.Draws.signs: the top bit of each element's random bits, as -1 or +1
            s0u, s1u = k0.to(tl.uint32), ((k1 + signs_salt) & 0xFFFFFFFF).to(tl.uint32)
            for first in range(0, n_signs, BLOCK_N):
                index = (first + tl.arange(0, BLOCK_N)).to(tl.int64)
                tl.store(signs_ptr + index, 1.0 - 2.0 * (element_bits(index, s0u, s1u) >> 31).to(tl.float32), mask=index < n_signs)

    _launch_key = Relauncher(_key_kernel)

    # Not specialized on (mxfp4_gluon._mx_stats_kernel says why): a salt word and a chunk's first row,
    # which vary per operand and chunk, and the tile counts and K_PAD, which vary with the operand's
    # shape. R and K stay: their divisibility decides how wide the masked loads can be.
    @triton.jit(do_not_specialize=["K_PAD", "n_tiles", "n_ktiles", "salt", "row0"])
    def _mx_kernel(x_ptr, stride_r, stride_k, out_ptr, ostride_r, ostride_k, copy_ptr, signs_ptr, key_ptr, stats_ptr,
                   R, K, K_PAD, n_tiles, n_ktiles, norm, salt, row0,
                   HB: tl.constexpr, HAS_SIGNS: tl.constexpr, STOCHASTIC: tl.constexpr, PRESCALE: tl.constexpr,
                   WRITE: tl.constexpr, COPY: tl.constexpr, STATS: tl.constexpr, BR: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        programs = tl.num_programs(0)
        NB: tl.constexpr = BK // 32
        rows_in_tile = tl.arange(0, BR)
        cols_in_tile = tl.arange(0, BK)
        hist = tl.zeros((256,), tl.int32)
        # Scalar sums over whole tiles, no per-block masks (masked per-block sums ran 1.5-2.5× slower:
        # examples/results/h100-observe-2026-11-24/run2-dedupe-copy-wholetile/kernels.log). Elements
        # outside the operand load as 0 and stay 0 through rotation and quantization (a Hadamard block never straddles K),
        # so they add exactly 1 to the zero-input and zero-code counts each and one block of exponent
        # code 0 (shared −127) each: those known amounts are taken off.
        zeros_in = tl.sum(tl.zeros((2,), tl.int64), axis=0)
        zeros_code = tl.sum(tl.zeros((2,), tl.int64), axis=0)
        saturated_n = tl.sum(tl.zeros((2,), tl.int64), axis=0)
        outside_blocks = tl.sum(tl.zeros((2,), tl.int64), axis=0)
        signal_sum = tl.sum(tl.zeros((2,), tl.float64), axis=0)
        noise_sum = tl.sum(tl.zeros((2,), tl.float64), axis=0)
        if STOCHASTIC:
            k0, k1s = _key_words(key_ptr, salt)
        for tile in range(pid, n_tiles, programs):
            rt = tile // n_ktiles
            kt = tile % n_ktiles
            r = rt * BR + rows_in_tile
            k = kt * BK + cols_in_tile
            in_rows = r < R
            inside = in_rows[:, None] & (k < K)[None, :]
            loaded = tl.load(x_ptr + r[:, None].to(tl.int64) * stride_r + k[None, :].to(tl.int64) * stride_k, mask=inside, other=0.0)
            if COPY:  # the input itself, unchanged, laid out like out (the exact GEMM's row-major operand)
                tl.store(copy_ptr + r[:, None].to(tl.int64) * ostride_r + k[None, :].to(tl.int64) * ostride_k, loaded, mask=inside)
            x = loaded.to(tl.float32)
            source = x
            if HB > 1:
                if HAS_SIGNS:
                    s = tl.load(signs_ptr + k, mask=k < K, other=1.0)
                    x = x * (s * norm)[None, :]
                else:
                    x = x * norm
                if HB >= 2:
                    x = _butterfly(x, BR, BK, 1)
                if HB >= 4:
                    x = _butterfly(x, BR, BK, 2)
                if HB >= 8:
                    x = _butterfly(x, BR, BK, 4)
                if HB >= 16:
                    x = _butterfly(x, BR, BK, 8)
                if HB >= 32:
                    x = _butterfly(x, BR, BK, 16)
                if HB >= 64:
                    x = _butterfly(x, BR, BK, 32)
                if HB >= 128:
                    x = _butterfly(x, BR, BK, 64)
                source = x
            if PRESCALE:
                x = x * 0.75
            blocks = tl.reshape(x, (BR, NB, 32))
            a_in = tl.abs(blocks)
            # NaN and ±Inf have an all-ones exponent field (bit tests: the compiler may assume x == x).
            bad = ((blocks.to(tl.int32, bitcast=True) & 0x7F800000) == 0x7F800000).to(tl.int32)
            nan_block = tl.max(bad, axis=2) > 0
            amax = tl.max(a_in, axis=2)
            e_field = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF
            shared = tl.where(e_field == 0, -127, tl.maximum(e_field - 129, -127))
            shared = tl.where(nan_block, -2, shared)  # the torch path's exponent for a non-finite amax
            scaled = blocks * _exp2(-shared)[:, :, None]
            a = tl.abs(scaled)
            if STOCHASTIC:
                step = tl.where(a < 2, 0.5, tl.where(a < 4, 1.0, 2.0))
                # The step is a power of two: a product by its reciprocal is the torch path's a / step,
                # rounded the same, without an IEEE division (0.31 -> 0.26 ms on an 8192 x 5632 operand).
                inv = tl.where(a < 2, 2.0, tl.where(a < 4, 1.0, 0.5))
                low = libdevice.floor(a * inv) * step
                u = tl.reshape(uniform((row0 + r[:, None].to(tl.int64)) * K_PAD + k[None, :], k0, k1s), (BR, NB, 32))
                grid = low + tl.where(u < (a - low) * inv, step, 0.0)
            else:
                grid = tl.where(a < 2, libdevice.rint(a * 2) * 0.5, tl.where(a < 4, libdevice.rint(a), libdevice.rint(a * 0.5) * 2))
            # The sign goes on as a bit: the compiler may negate as 0 − x, which gives +0 for a negative input rounding to 0.
            signed = tl.where(scaled < 0, (grid.to(tl.int32, bitcast=True) | -2147483648).to(tl.float32, bitcast=True), grid)
            signed = tl.minimum(tl.maximum(signed, -6.0), 6.0)
            out = signed * _exp2(shared)[:, :, None]
            out = tl.where(nan_block[:, :, None], float("nan"), out)
            if PRESCALE:
                out = tl.math.div_rn(out, 0.75)
            if WRITE:
                o = tl.reshape(out, (BR, BK))
                tl.store(out_ptr + r[:, None].to(tl.int64) * ostride_r + k[None, :].to(tl.int64) * ostride_k, o.to(out_ptr.dtype.element_ty), mask=inside)
            if STATS:
                src = tl.reshape(source, (BR, NB, 32))
                rows_real = tl.minimum(tl.maximum(R - rt * BR, 0), BR)
                cols_real = tl.minimum(tl.maximum(K_PAD - kt * BK, 0), BK)
                outside = (BR * BK - rows_real * cols_real).to(tl.int64)
                zeros_in += tl.sum((src == 0).to(tl.int32)).to(tl.int64) - outside
                zeros_code += tl.sum((grid == 0).to(tl.int32)).to(tl.int64) - outside
                saturated_n += tl.sum((grid > 6.0).to(tl.int32)).to(tl.int64)
                diff = src - out
                signal_sum += tl.sum((src * src).to(tl.float64))
                noise_sum += tl.sum((diff * diff).to(tl.float64))
                code = tl.where(nan_block, 255, shared + 127)
                hist += tl.histogram(tl.reshape(code, (BR * NB,), can_reorder=True), 256)
                outside_blocks += (BR * NB - rows_real * (cols_real // 32)).to(tl.int64)
        if STATS:
            tl.atomic_add(stats_ptr, zeros_in.to(tl.float64))
            tl.atomic_add(stats_ptr + 1, zeros_code.to(tl.float64))
            tl.atomic_add(stats_ptr + 2, saturated_n.to(tl.float64))
            tl.atomic_add(stats_ptr + 3, signal_sum)
            tl.atomic_add(stats_ptr + 4, noise_sum)
            bins = tl.arange(0, 256)
            counts = hist.to(tl.int64) - tl.where(bins == 0, outside_blocks, 0)
            tl.atomic_add(stats_ptr + 5 + bins, counts.to(tl.float64), mask=counts != 0)  # most bins are empty

    _launch_mx = Relauncher(_mx_kernel)


class Launch(NamedTuple):
    #: elements per tile, warps per program, programs per SM
    elements: int
    warps: int
    programs_per_sm: int


#: How the kernel is launched, by (what it makes, whether its blocks run along the operand's last axis).
#: With stats, fewer warps per program run faster: each tile's sums take fewer cross-warp steps
#: (H100, 8192 × 5632 bf16, H32: stats along the last axis 0.278 → 0.207 ms on one warp, values and
#: stats along the first 0.490 → 0.412 ms on two); values along the first axis too (0.167 → 0.113 ms).
#: examples/results/h100-2026-11-24c/*-kernel-*.log; examples/bench_kernels.py compares settings.
LAUNCH = {("values", True): Launch(4096, 4, 8), ("values", False): Launch(2048, 2, 16),
          ("stats", True): Launch(1024, 1, 16), ("stats", False): Launch(2048, 2, 8)}
#: Elements a thread holds at most with stats (at 64, values and stats along tokens ran 5× slower).
STATS_PER_THREAD = 32
_sm_count = {}


def _sms(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sm_count:
        _sm_count[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sm_count[index]


def quantize(x: torch.Tensor, signs: Optional[torch.Tensor], hadamard: int, stochastic: bool, prescale: bool,
             draws: Optional[Draws], out_dtype: Optional[torch.dtype], stats: Optional[torch.Tensor],
             out_row_major: bool = False, copy: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """MXFP4 of a 2-D CUDA operand [rows, K] in blocks along K, read through its strides (a transposed
    view is read in place, with tiles whose contiguous axis is the rows).

    Returns the values of x's shape in `out_dtype`, laid out like x or (out_row_major) contiguous
    (None without out_dtype), and adds
    the operand's stats into `stats` (a [STATS_LEN] float64 row) when given. `copy` (x's shape and dtype,
    strided like the values): receives x itself in the same pass (a transposed operand's exact row-major copy). `signs` (float32, length K) and `hadamard` (1 = no rotation)
    give the rotation; stochastic rounding hashes its uniforms from `draws` in place, the torch path's bits.
    """
    rows, k = x.shape
    along_last = x.stride(1) == 1 or k == 1
    k_pad = -(-k // BLOCK) * BLOCK
    key = keyed(draws, "stochastic rounding").key if stochastic else None
    salt = salt_word(draws.salt) if stochastic else 0
    row0 = draws.row0 if stochastic else 0
    out = None
    if out_dtype is not None:
        row_major = along_last or out_row_major
        out = torch.empty((rows, k), dtype=out_dtype, device=x.device) if row_major else torch.empty((k, rows), dtype=out_dtype, device=x.device).t()
    if copy is not None and (out is None or copy.stride() != out.stride() or copy.shape != x.shape or copy.dtype != x.dtype):
        raise ValueError(f"quantize: copy= must have x's shape {tuple(x.shape)} and dtype {x.dtype}, strided like the values")
    # Launches with stats go to mxfp4_gluon's kernel where it fits (a block per thread: 1.8-2.3× faster on layer-sized operands).
    if stats is not None and _launched_on_gluon(x, hadamard, mxfp4_gluon.launch, x, signs, hadamard, mxfp4_norm(hadamard), prescale, key, salt,
                                                row0, out, stats, copy):
        return out
    bk = max(BLOCK, hadamard)
    # Along the first axis a tile's rows are the contiguous ones: at least 64 of them.
    launch = LAUNCH["stats" if stats is not None else "values", along_last]
    br = max(launch.elements // bk, 16) if along_last else max(launch.elements // bk, 64)
    warps = max(launch.warps, br * bk // (32 * STATS_PER_THREAD)) if stats is not None else launch.warps
    n_ktiles = -(-k_pad // bk)
    tiles = -(-rows // br) * n_ktiles
    programs = max(1, min(tiles, _sms(x.device) * launch.programs_per_sm))
    dummy = x
    _launch_mx(programs, (
        x, x.stride(0), x.stride(1), out if out is not None else dummy, out.stride(0) if out is not None else 0, out.stride(1) if out is not None else 0,
        copy if copy is not None else dummy, signs if signs is not None else dummy, key if key is not None else dummy,
        stats if stats is not None else dummy,
        rows, k, k_pad, tiles, n_ktiles, mxfp4_norm(hadamard), salt, row0),
        dict(HB=hadamard, HAS_SIGNS=signs is not None, STOCHASTIC=stochastic, PRESCALE=prescale,
             WRITE=out is not None, COPY=copy is not None, STATS=stats is not None, BR=br, BK=bk), enable_fp_fusion=False, num_warps=warps)
    return out


def _launched_on_gluon(x: torch.Tensor, hadamard: int, launch: Callable[..., None], *args) -> bool:
    """launch(*args, the device's SM count) on mxfp4_gluon's kernel, where it fits x and `hadamard`.
    False where it does not, or where it failed to compile or launch: that leaves nothing written,
    and the Triton kernel takes every launch from then on (mxfp4_gluon.gave_up)."""
    if not mxfp4_gluon.fits(x, hadamard):
        return False
    try:
        launch(*args, _sms(x.device))
        return True
    except Exception as error:  # noqa: BLE001 - whatever the platform's compiler raises
        mxfp4_gluon.gave_up(error)
        return False


def stats_of_segments(base: torch.Tensor, strides: Tuple[int, int], segments: torch.Tensor, most_blocks: int, signs: Optional[torch.Tensor],
                      hadamard: int, prescale: bool, stats: torch.Tensor) -> bool:
    """mxfp4_gluon.launch_segments (the stats of many operands of one storage in one launch) where
    Gluon's kernel fits; False where it does not or failed to compile: then measure each operand."""
    return _launched_on_gluon(base, hadamard, mxfp4_gluon.launch_segments, base, strides, segments, most_blocks, signs, hadamard,
                              mxfp4_norm(hadamard), prescale, stats)


def _sampled(x: torch.Tensor) -> tuple:
    rows, cols = x.shape
    return x, x.stride(0), x.stride(1), rows, cols, min(rows, SAMPLE), min(cols, SAMPLE)


def key_and_signs(a: torch.Tensor, b: Optional[torch.Tensor], s0: int, s1: int, n_signs: int) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """draws.key_and_signs's device part in one launch, for non-empty 2-D CUDA operands (bf16, fp16 or fp32)."""
    key = torch.empty(2, dtype=torch.int64, device=a.device)
    signs = torch.empty(n_signs, dtype=torch.float32, device=a.device) if n_signs else None
    _launch_key(1, (*_sampled(a), *_sampled(b if b is not None else a), s0, s1, key, signs if signs is not None else key, n_signs,
                    salt_word(SALT_SIGNS)),
                dict(WIDE_A=a.element_size() == 4, HAS_B=b is not None, WIDE_B=b is not None and b.element_size() == 4, S=SAMPLE,
                     SIGNS=signs is not None, BLOCK_N=1024))
    return key, signs


def mxfp4_norm(hadamard: int) -> float:
    return hadamard_norm(hadamard) if hadamard > 1 else 1.0

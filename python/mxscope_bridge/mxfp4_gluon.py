"""MXFP4 with operand stats on CUDA through Gluon (Triton's explicit-layout dialect): one 32-element
block per thread.

`mxfp4_triton`'s kernel lets Triton spread a block over several threads, so every block amax and every
per-tile sum of the stats crosses threads (shuffles and, across warps, shared memory with a barrier
each). Here a thread holds a whole block: the Hadamard butterflies, the block's amax and its stats are
the thread's own registers, the stats add up per thread across tiles, and the threads' sums meet once
per program. Only the histogram of shared exponents is gathered per tile.

The values are `mxfp4_triton`'s bit for bit, so the torch path's: the same rotation arithmetic in the
same order, and the amax and the E2M1 rounding in fewer operations that give the same results (see the
comments); energies are float64 sums in another order (equal to about 1e-15, relative). Used for
launches with stats and a Hadamard block of at most 32 on NVIDIA GPUs (`fits`); elsewhere, and after
a failure to compile (`gave_up`), the Triton kernel takes them.
"""
from __future__ import annotations

import warnings
from typing import Optional, Tuple

import torch

from .triton_launch import Relauncher

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    from .hash_kernels import uniform
except ImportError:  # pragma: no cover - Triton before Gluon (3.5), or no Triton
    gluon = None

BLOCK = 32
#: Warps per program and programs per SM (H100, 8192 × 5632 bf16, H32: stats along K 0.202 → 0.112 ms
#: against mxfp4_triton's kernel, values and stats along tokens 0.345 → 0.162 ms; 1, 2 and 4 warps
#: measured within 0.01 ms of each other; examples/results/h100-2026-11-24d/).
WARPS = 2
PROGRAMS_PER_SM = 16


#: Why the kernel is not used in this process (None while it is): set by `gave_up`, or by whoever
#: compares it with the Triton kernel (the GPU tests, the benchmarks) to a reason of their own.
UNUSABLE: Optional[str] = None


def fits(x: torch.Tensor, hadamard: int) -> bool:
    """Whether this kernel takes x's launch: Gluon present and usable, an NVIDIA GPU (the layout puts a
    block's 32 elements in one thread of 32-thread warps; ROCm's are 64), a rotation within one block."""
    return gluon is not None and UNUSABLE is None and x.is_cuda and torch.version.hip is None and hadamard <= BLOCK


def gave_up(error: BaseException) -> None:
    """The kernel failed to compile or launch here (a Triton whose Gluon differs, a GPU it does not
    support): mxfp4_triton's kernel takes every launch from now on, with the same bits, and the
    reason is warned about once."""
    global UNUSABLE
    UNUSABLE = f"{type(error).__name__}: {error}"[:500]
    warnings.warn(f"mxscope: the Gluon stats kernel is not usable here ({UNUSABLE}); the Triton kernel computes the stats instead (same values, slower)",
                  RuntimeWarning, stacklevel=2)


if gluon is not None:

    @gluon.jit
    def _exp2(e):
        # 2**e as float32 for integer e in [-149, 127], from the IEEE bits (subnormals too).
        normal = gl.maximum(e + 127, 0) << 23
        subnormal = gl.full_like(e, 1) << gl.minimum(gl.maximum(e + 149, 0), 22)
        return gl.where(e >= -126, normal, subnormal).to(gl.float32, bitcast=True)

    @gluon.jit
    def _rint(v):
        # Nearest integer, ties to even, for 0 <= v < 2**22: float32 additions round that way
        # (floating-point contraction is off, so nothing folds them).
        return (v + 12582912.0) - 12582912.0

    @gluon.jit
    def _butterfly(x, TB: gl.constexpr, H: gl.constexpr):
        # One Walsh-Hadamard stage along a block: (x[j], x[j+H]) -> (x[j]+x[j+H], x[j]-x[j+H]), within a thread.
        y = gl.permute(gl.reshape(x, [TB, 32 // (2 * H), 2, H]), [0, 1, 3, 2])
        a, b = gl.split(y)
        y = gl.permute(gl.join(a + b, a - b), [0, 1, 3, 2])
        return gl.reshape(y, [TB, 32])

    # Not specialized on: what varies from launch to launch without changing the code worth compiling.
    # The salt word and a chunk's first row vary per operand and chunk; the row and block counts, and a
    # segmented launch's programs per operand, with an expert's tokens each step. Triton compiles a
    # kernel per divisibility by 16 and equality to 1 of every integer it specializes on: a MoE run met
    # a new combination in its timed steps and stalled a stats step ~0.65 s compiling it
    # (docs/bridge.md, "compiles in the middle of a run"). K and the strides stay specialized: they
    # decide the loads' vector width and whether a row is contiguous.
    @gluon.jit(do_not_specialize=["R", "K_PAD", "NBK", "n_blocks", "salt", "row0", "per_segment", "stats_len"])
    def _mx_stats_kernel(x_ptr, stride_r, stride_k, out_ptr, ostride_r, ostride_k, copy_ptr, signs_ptr, key_ptr, stats_ptr,
                         R, K, K_PAD, NBK, n_blocks, norm, salt, row0, segments_ptr, per_segment, stats_len,
                         HB: gl.constexpr, HAS_SIGNS: gl.constexpr, STOCHASTIC: gl.constexpr, PRESCALE: gl.constexpr,
                         WRITE: gl.constexpr, COPY: gl.constexpr, LANES_ALONG_K: gl.constexpr, STORE_ALONG_K: gl.constexpr,
                         SEGMENTED: gl.constexpr, NUM_WARPS: gl.constexpr):
        # A tile is one block per thread. Along the last axis neighbouring threads take neighbouring
        # blocks of a row; along the first axis (a transposed operand) neighbouring rows, whose
        # elements are contiguous in memory, so each load of a warp reads one stretch.
        L: gl.constexpr = gl.BlockedLayout([1, 32], [32, 1], [NUM_WARPS, 1], [1, 0])
        HL: gl.constexpr = gl.BlockedLayout([256 // (32 * NUM_WARPS)], [32], [NUM_WARPS], [0])  # NUM_WARPS <= 8
        BL: gl.constexpr = gl.SliceLayout(1, L)
        TB: gl.constexpr = 32 * NUM_WARPS
        pid = gl.program_id(0)
        programs = gl.num_programs(0)
        if SEGMENTED:  # stats only: `per_segment` programs for each operand of the table (launch_segments)
            segment = pid // per_segment
            pid = pid % per_segment
            programs = per_segment
            entry = segments_ptr + segment * 3
            x_ptr = x_ptr + gl.load(entry)
            R = gl.load(entry + 1).to(gl.int32)
            K = gl.load(entry + 2).to(gl.int32)
            NBK = (K + 31) // 32
            n_blocks = R * NBK
            stats_ptr = stats_ptr + segment * stats_len
        j = gl.arange(0, 32, layout=gl.SliceLayout(0, L))
        lane = gl.arange(0, TB, layout=BL)
        # Values (and the copy) whose rows are contiguous along K, made with lanes along the rows (a
        # transposed operand's row-major values), are stored from a layout of four threads a row: each
        # store of a warp then fills whole 64-byte stretches of eight rows, where stored from the
        # block-per-thread layout it wrote 16 bytes into each of 32 rows (H100, 8192 × 5632 bf16 along
        # tokens: values, stats and the copy 305 → 178 µs, values and stats 161 → 137 µs).
        SL: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [NUM_WARPS, 1], [1, 0])
        j_store = gl.arange(0, 32, layout=gl.SliceLayout(0, SL))
        zeros_in = gl.zeros([TB], gl.int32, BL)
        zeros_code = gl.zeros([TB], gl.int32, BL)
        saturated = gl.zeros([TB], gl.int32, BL)
        signal = gl.zeros([TB], gl.float64, BL)
        noise = gl.zeros([TB], gl.float64, BL)
        hist = gl.zeros([256], gl.int32, HL)
        if STOCHASTIC:  # the key's words as uint32, the second with the operand's salt word (draws.element_bits)
            k0 = (gl.load(key_ptr) & 0xFFFFFFFF).to(gl.uint32)
            k1s = ((gl.load(key_ptr + 1) + salt) & 0xFFFFFFFF).to(gl.uint32)
        for tile in range(pid, gl.cdiv(n_blocks, TB), programs):
            b = tile * TB + lane
            real = b < n_blocks
            if LANES_ALONG_K:
                r = b // NBK
                kb = b % NBK
            else:
                r = b % R
                kb = b // R
            k = kb[:, None] * 32 + j[None, :]
            inside = real[:, None] & (k < K)
            if STORE_ALONG_K:
                k_store = gl.convert_layout(kb, gl.SliceLayout(1, SL))[:, None] * 32 + j_store[None, :]
                stored_at = gl.convert_layout(r, gl.SliceLayout(1, SL))[:, None].to(gl.int64) * ostride_r + k_store.to(gl.int64) * ostride_k
                stored = gl.convert_layout(real, gl.SliceLayout(1, SL))[:, None] & (k_store < K)
            else:
                stored_at = r[:, None].to(gl.int64) * ostride_r + k.to(gl.int64) * ostride_k
                stored = inside
            loaded = gl.load(x_ptr + r[:, None].to(gl.int64) * stride_r + k.to(gl.int64) * stride_k, mask=inside, other=0.0)
            if COPY:  # the input itself, laid out like the values (the exact GEMM's row-major operand)
                if STORE_ALONG_K:
                    gl.store(copy_ptr + stored_at, gl.convert_layout(loaded, SL), mask=stored)
                else:
                    gl.store(copy_ptr + stored_at, loaded, mask=stored)
            x = loaded.to(gl.float32)
            if HB > 1:
                if HAS_SIGNS:
                    s = gl.load(signs_ptr + k, mask=k < K, other=1.0)
                    x = x * (s * norm)
                else:
                    x = x * norm
                if HB >= 2:
                    x = _butterfly(x, TB, 1)
                if HB >= 4:
                    x = _butterfly(x, TB, 2)
                if HB >= 8:
                    x = _butterfly(x, TB, 4)
                if HB >= 16:
                    x = _butterfly(x, TB, 8)
                if HB >= 32:
                    x = _butterfly(x, TB, 16)
                x = gl.convert_layout(x, L)
            source = x
            if PRESCALE:
                x = x * 0.75
            # The amax as bits: |x|'s bits order like its values, and NaN and ±Inf (all-ones exponent)
            # above every finite value, so one integer max gives both (bit tests: the compiler may assume x == x).
            amax_bits = gl.max(gl.abs(x).to(gl.int32, bitcast=True), axis=1)
            nan_block = amax_bits >= 0x7F800000
            e_field = (amax_bits >> 23) & 0xFF
            shared = gl.where(e_field == 0, -127, gl.maximum(e_field - 129, -127))
            shared = gl.where(nan_block, -2, shared)
            scaled = x * _exp2(-shared)[:, None]
            a = gl.abs(scaled)
            if STOCHASTIC:
                step = gl.where(a < 2, 0.5, gl.where(a < 4, 1.0, 2.0))
                # The step is a power of two: a product by its reciprocal is the torch path's a / step,
                # rounded the same, without an IEEE division (0.31 -> 0.26 ms on an 8192 x 5632 operand).
                inv = gl.where(a < 2, 2.0, gl.where(a < 4, 1.0, 0.5))
                low = gl.floor(a * inv) * step
                index = (row0 + r[:, None].to(gl.int64)) * K_PAD + k
                u = uniform(index, k0, k1s)
                grid = low + gl.where(u < (a - low) * inv, step, 0.0)
            else:
                # The E2M1 grid's step (0.5, 1, 2) by binade; scaling by a power of two is exact, so one
                # rounding serves all three (mxfp4_triton rounds each binade's way and picks one).
                up = gl.where(a < 2, 2.0, gl.where(a < 4, 1.0, 0.5))
                grid = _rint(a * up) * gl.where(a < 2, 0.5, gl.where(a < 4, 1.0, 2.0))
            # Clamped before the sign, which goes on as a bit: the compiler may negate as 0 − x, which
            # gives +0 for a negative input rounding to 0.
            clamped = gl.minimum(grid, 6.0)
            signed = gl.where(scaled < 0, (clamped.to(gl.int32, bitcast=True) | -2147483648).to(gl.float32, bitcast=True), clamped)
            out = signed * _exp2(shared)[:, None]
            out = gl.where(nan_block[:, None], float("nan"), out)
            if PRESCALE:
                out = gl.div_rn(out, 0.75)
            if WRITE:
                if STORE_ALONG_K:
                    gl.store(out_ptr + stored_at, gl.convert_layout(out.to(out_ptr.dtype.element_ty), SL), mask=stored)
                else:
                    gl.store(out_ptr + stored_at, out.to(out_ptr.dtype.element_ty), mask=stored)
            # Elements past K inside the last block are the torch path's zero padding: they count.
            zeros_in += gl.where(real, gl.sum((source == 0).to(gl.int32), axis=1), 0)
            zeros_code += gl.where(real, gl.sum((grid == 0).to(gl.int32), axis=1), 0)
            saturated += gl.sum((grid > 6.0).to(gl.int32), axis=1)
            diff = source - out
            signal += gl.sum((source * source).to(gl.float64), axis=1)
            noise += gl.sum((diff * diff).to(gl.float64), axis=1)
            hist += gl.histogram(gl.where(nan_block, 255, shared + 127), 256, mask=real, layout=HL)
        gl.atomic_add(stats_ptr, gl.sum(zeros_in, axis=0).to(gl.float64))
        gl.atomic_add(stats_ptr + 1, gl.sum(zeros_code, axis=0).to(gl.float64))
        gl.atomic_add(stats_ptr + 2, gl.sum(saturated, axis=0).to(gl.float64))
        gl.atomic_add(stats_ptr + 3, gl.sum(signal, axis=0))
        gl.atomic_add(stats_ptr + 4, gl.sum(noise, axis=0))
        bins = gl.arange(0, 256, layout=HL)
        gl.atomic_add(stats_ptr + 5 + bins, hist.to(gl.float64), mask=hist != 0)  # most bins are empty

    _launch_stats = Relauncher(_mx_stats_kernel)


def launch(x: torch.Tensor, signs: Optional[torch.Tensor], hadamard: int, norm: float, prescale: bool, key: Optional[torch.Tensor],
           salt: int, row0: int, out: Optional[torch.Tensor], stats: torch.Tensor, copy: Optional[torch.Tensor], sm_count: int) -> None:
    """mxfp4_triton.quantize's launch with stats, when `fits`: its arguments, already made (the values
    `out` and `copy` allocated, stochastic rounding's `key`, salt word and first row, the rotation's `norm`)."""
    rows, k = x.shape
    nbk = -(-k // BLOCK)
    n_blocks = rows * nbk
    programs = max(1, min(-(-n_blocks // (32 * WARPS)), sm_count * PROGRAMS_PER_SM))
    lanes_along_k = x.stride(1) == 1 or k == 1
    _launch_stats(programs, (
        x, x.stride(0), x.stride(1), out if out is not None else x, out.stride(0) if out is not None else 0, out.stride(1) if out is not None else 0,
        copy if copy is not None else x, signs if signs is not None else x, key if key is not None else x, stats,
        rows, k, nbk * BLOCK, nbk, n_blocks, norm, salt, row0, x, 1, 0),
        dict(HB=hadamard, HAS_SIGNS=signs is not None, STOCHASTIC=key is not None, PRESCALE=prescale, WRITE=out is not None, COPY=copy is not None,
             LANES_ALONG_K=lanes_along_k,
             STORE_ALONG_K=out is not None and out.stride(1) == 1 and not lanes_along_k, SEGMENTED=False, NUM_WARPS=WARPS),
        num_warps=WARPS, enable_fp_fusion=False)


def launch_segments(base: torch.Tensor, strides: Tuple[int, int], segments: torch.Tensor, most_blocks: int, signs: Optional[torch.Tensor],
                    hadamard: int, norm: float, prescale: bool, stats: torch.Tensor, sm_count: int) -> None:
    """The stats alone of many operands in one launch (nearest-even rounding): the operands lie in
    `base`'s storage with the same `strides`, and `segments` (int64 [n, 3], on the device) gives each
    one's offset from `base` in elements, rows and K; operand i's stats are added into stats[i] (a
    [n, STATS_LEN] float64 tensor). `most_blocks`: the largest operand's blocks, which sizes the
    programs each operand gets."""
    count = segments.shape[0]
    per_segment = max(1, min(-(-most_blocks // (32 * WARPS)), -(-sm_count * PROGRAMS_PER_SM // count)))
    lanes_along_k = strides[1] == 1
    _launch_stats(count * per_segment, (
        base, strides[0], strides[1], base, 0, 0, base, signs if signs is not None else base, base, stats,
        0, 0, 0, 0, 0, norm, 0, 0, segments, per_segment, stats.stride(0)),
        dict(HB=hadamard, HAS_SIGNS=signs is not None, STOCHASTIC=False, PRESCALE=prescale, WRITE=False, COPY=False,
             LANES_ALONG_K=lanes_along_k, STORE_ALONG_K=False, SEGMENTED=True, NUM_WARPS=WARPS),
        num_warps=WARPS, enable_fp_fusion=False)

"""What one training step contributes to telemetry, gathered from hooks or the emulated GEMMs.

A step is either a stats step (operand stats and the Wgrad error E against the exact ∇W) or the step
just before one (only E, kept so the stats step can report lag-1 correlation). Operand stats of
several micro-batches add up; the Wgrad error goes to `wgrad_error.WgradErrors` layer by layer.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Set, Tuple

import torch

from . import mx_ops, stats
from .formats import finite_amax
from .precision import BLOCK_PRECISIONS, quantize_in_format, quantize_operand as quantize_at_precision, uses_formats
from .draws import SALT_A, SALT_B, RandomSource
from .rotation import make_rotation, rotate
from .wgrad_error import WgradErrors

from .protocol import GEMM_OPERANDS

GRADIENT_OPERANDS = ("dy",)


#: Why mm_float32 could not multiply bf16 operands directly (for the benchmark's report).
FALLBACKS = []


def mm_float32(a: torch.Tensor, b: torch.Tensor, exact_in: torch.dtype) -> torch.Tensor:
    """a·b with float32 accumulation and output. Operands holding `exact_in` values (bf16/fp16, of
    which MXFP4 values are a subset) are multiplied exactly: on CUDA as bf16/fp16 with a float32 output
    (the bf16 rate). Otherwise the product is float32 under the trainer's own TF32 setting, the one its
    own ∇W gets: the setting is process-wide, and flipping it here, on the backward worker's thread,
    would change the precision of the trainer's GEMMs running meanwhile."""
    if a.is_cuda and exact_in in (torch.bfloat16, torch.float16):
        # Measured on an H100 (torch 2.11): with a transposed view as an operand, the float32-output
        # product copies both to float32 and runs a TF32 kernel; row-major operands run at the bf16 rate.
        a16, b16 = a.to(exact_in).contiguous(), b.to(exact_in).contiguous()
        try:
            return torch.mm(a16, b16, out_dtype=torch.float32)
        except (TypeError, RuntimeError) as error:  # torch before out_dtype, or a layout it does not take
            FALLBACKS.append(f"{tuple(a16.shape)}{a16.stride()} x {tuple(b16.shape)}{b16.stride()}: {error}"[:300])
    return a.to(torch.float32) @ b.to(torch.float32)


def out_of_device_memory(error: BaseException) -> bool:
    """Whether `error` is an allocation the device could not make (CUDA's, or another backend's)."""
    return isinstance(error, torch.cuda.OutOfMemoryError) or (isinstance(error, RuntimeError) and "out of memory" in str(error))


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a GEMM on x runs in: autocast's on CUDA, else x's own."""
    if x.is_cuda and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    return x.dtype


def in_backward() -> bool:
    """Whether autograd's engine is running this code (a checkpoint recomputing a forward, a hook)."""
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


def measured_gemm(gemm: dict) -> dict:
    """What a GEMM's operand stats measure: its config where it is a block format, else MXFP4 with its
    rotation, rounding and scale rule (what MXFP4 would do to an fp32, bf16 or fp8 GEMM's operands)."""
    return gemm if gemm["precision"] in BLOCK_PRECISIONS else dict(gemm, precision="mxfp4")


def fixed_mxfp4(gemm: dict) -> bool:
    """MXFP4 under its own scale rule, nearest-even rounding, no rotation or a fixed Hadamard one: a
    GEMM that draws no random bits, so the operands of many layers (a grouped call's experts) can be
    quantized or measured at once, each layer's giving what its own would."""
    return (gemm["precision"] == "mxfp4" and not uses_formats(gemm) and gemm["rounding"] != "stochastic"
            and gemm["rotation"] in ("none", "hadamard"))


class StepCapture:
    def __init__(self, with_stats: bool, random: RandomSource, misfit: str = "pad", layers: Optional[Set[str]] = None,
                 errors: Optional[WgradErrors] = None):
        self.with_stats = with_stats
        #: where each layer's Wgrad error goes as its backward runs
        self.errors = errors if errors is not None else WgradErrors(0, lambda layer: [])
        #: the observed layer names (None: every layer)
        self.layers = layers
        #: the run's seed, from which each drawing GEMM call's bits are keyed
        self.random = random
        #: what a Hadamard block that does not divide the reduction dimension does (rotation.MISFITS)
        self.misfit = misfit
        #: (layer, gemm) -> (precision, {operand: sums})
        self.operands: Dict[Tuple[str, str], Tuple[str, Dict[str, stats.OperandSums]]] = {}
        #: (layer, gemm) whose stats simulate MXFP4 on operands of a GEMM that ran at another precision
        self.simulated: Set[Tuple[str, str]] = set()
        #: (layer, gemm, operand) -> sums of the quantized operand a trainer's own kernel produced
        self.kernel: Dict[Tuple[str, str, str], stats.OperandSums] = {}
        #: layer -> its calls in this forward pass (a checkpoint's recomputes are not calls)
        self.forward_calls: Dict[str, int] = {}
        #: a backward pass of this step has begun (a forward call after it starts another pass)
        self.backward_begun = False
        #: whether running out of device memory while measuring drops this step's telemetry instead
        #: of raising into the trainer: one process only (a rank that skipped its part of a
        #: collective would leave the others waiting in it)
        self.tolerates_oom = False
        #: why this step's telemetry is dropped, once the bridge has run out of device memory measuring it
        self.dropped: Optional[str] = None

    def measure(self, where: str, work: Callable, *args) -> None:
        """work(*args), the measuring of `where`: skipped once the step's telemetry is dropped, and
        where the device runs out of memory (tolerates_oom), the step's telemetry is dropped and the
        trainer's step goes on. The bridge's transient memory is bounded (wgrad_error.CHUNK_BYTES,
        grouped_observe.BATCH_BYTES), but a trainer that fills the device to within that much of
        its end would otherwise lose its run to the observer."""
        if self.dropped is not None:
            return
        try:
            work(*args)
        except Exception as error:
            if not (self.tolerates_oom and out_of_device_memory(error)):
                raise
            self.dropped = f"the bridge ran out of device memory measuring {where} ({str(error).splitlines()[0][:300]})"

    def forward_call(self, layer: str) -> None:
        """One call of `layer` in a forward pass. A module called twice in one pass (shared weights,
        a recurrent block) has one ∇W, the sum over its calls: from the second call on, its Wgrad
        error sums its calls too. Another pass in the same step (gradient accumulation) is not a
        repeat: its backward is a second Wgrad, which needs micro_batches."""
        if self.backward_begun:
            self.backward_begun, self.forward_calls = False, {}
            self.errors.another_forward_pass()
        calls = self.forward_calls.get(layer, 0) + 1
        self.forward_calls[layer] = calls
        if calls == 2:
            self.errors.called_repeatedly(layer)

    def observes(self, layer: str) -> bool:
        return self.layers is None or layer in self.layers

    def add_operand(self, layer: str, gemm: str, precision: str, operand: str, sums: stats.OperandSums) -> None:
        _, by_operand = self.operands.setdefault((layer, gemm), (precision, {}))
        by_operand[operand] = by_operand[operand].merged(sums) if operand in by_operand else sums

    def add_kernel_operand(self, layer: str, gemm: str, operand: str, sums: stats.OperandSums) -> None:
        key = (layer, gemm, operand)
        self.kernel[key] = self.kernel[key].merged(sums) if key in self.kernel else sums

    def observe_operands(self, layer: str, gemm_name: str, gemm: dict, a: Optional[torch.Tensor], b: Optional[torch.Tensor],
                         sums: Tuple = (None, None), precision: Optional[str] = None) -> None:
        """Operand stats of one GEMM (2-D operands with the reduction dim last; None = seen elsewhere).
        Stats the GEMM already computed are reused; otherwise MXFP4 with the GEMM's rotation is
        computed here (a random rotation then draws its own signs, keyed to the first operand measured here). `precision`: what the GEMM
        really ran at, when it is not `gemm`'s (an observed GEMM: the stats are then simulated)."""
        if not self.with_stats:
            return
        if precision is not None:
            self.simulated.add((layer, gemm_name))
        measured = measured_gemm(gemm)
        r = draws = None
        for name, x, s, salt in zip(GEMM_OPERANDS[gemm_name], (a, b), sums, (SALT_A, SALT_B)):
            if x is None:
                continue
            if s is None:
                if draws is None:  # the bits emulating this GEMM would draw (keyed as gemm_operands keys them)
                    first = a if a is not None else b
                    draws = self.random.draws(measured, f"{layer} {gemm_name}", first, b if first is a else None)
                    if gemm["rotation"] != "none":
                        r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], x.shape[-1], x.device, draws, self.misfit)
                what = f"{layer} {gemm_name} {name}"
                if uses_formats(measured):
                    _, s = quantize_in_format(x, measured, name in GRADIENT_OPERANDS, r, what, is_weight=name == "w", with_stats=True)
                else:
                    _, s = mx_ops.quantize_operand(x, measured, r, draws.for_operand(salt), what, with_stats=True)
            self.add_operand(layer, gemm_name, precision or gemm["precision"], name, s)

    def observe_each(self, layers: Sequence[str], gemm_name: str, gemm: dict, a: Optional[Sequence[torch.Tensor]],
                     b: Optional[Sequence[torch.Tensor]], precision: Optional[str] = None) -> None:
        """observe_operands of each of `layers` (a grouped call's experts) with operands a[i] and b[i]
        (a or b None: seen elsewhere), with the same stats: where the operands allow it (MXFP4,
        nearest-even rounding, no rotation or a fixed Hadamard one, mx_ops.segment_stats), one launch
        per operand for all the layers, else layer by layer."""
        if not self.with_stats:
            return
        measured = measured_gemm(gemm)
        if not fixed_mxfp4(measured):
            for i, layer in enumerate(layers):
                self.observe_operands(layer, gemm_name, gemm, a[i] if a is not None else None, b[i] if b is not None else None, precision=precision)
            return
        for index, (name, views) in enumerate(zip(GEMM_OPERANDS[gemm_name], (a, b))):
            if views is None or not views:
                continue
            # No signs: one rotation whatever K is. segment_stats refuses a K the block does not divide,
            # which observe_operands pads, or leaves unrotated under the "skip" misfit rule.
            r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], views[0].shape[-1], views[0].device) if gemm["rotation"] != "none" else None
            found = mx_ops.segment_stats(views, measured, r)
            if found is None:
                for layer, view in zip(layers, views):
                    self.observe_operands(layer, gemm_name, gemm, view if index == 0 else None, view if index == 1 else None, precision=precision)
                continue
            for layer, sums in zip(layers, found):
                if precision is not None:
                    self.simulated.add((layer, gemm_name))
                self.add_operand(layer, gemm_name, precision or gemm["precision"], name, sums)


def gemm_operands(gemm: dict, a: torch.Tensor, b: torch.Tensor, a_is_gradient: bool, random: RandomSource, what: str,
                  out_dtype: torch.dtype, with_stats: bool, a_row_major: bool = False, misfit: str = "pad", b_is_weight: bool = False):
    """Both operands of a GEMM (2-D, reduction dim last) as the GEMM consumes them, in `out_dtype`,
    and (mxfp4 with stats) their OperandSums. a_row_major: a's values come contiguous (else laid out like a).
    The call's random bits are keyed to its operands (draws.py)."""
    if gemm["precision"] not in BLOCK_PRECISIONS:  # fp32, bf16, fp8: observe_operands measures them as MXFP4
        aq, _ = quantize_at_precision(a, gemm, a_is_gradient, None, None, what)
        bq, _ = quantize_at_precision(b, gemm, False, None, None, what)
        return aq.to(out_dtype), bq.to(out_dtype), (None, None)
    draws = random.draws(gemm, what, a, b)
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], a.shape[-1], a.device, draws, misfit)
    if not uses_formats(gemm):
        aq, sa = mx_ops.quantize_operand(a, gemm, r, draws, what, out_dtype, with_stats, out_row_major=a_row_major)
        bq, sb = mx_ops.quantize_operand(b, gemm, r, draws.for_operand(SALT_B), what, out_dtype, with_stats)
        return aq, bq, (sa, sb)
    # NVFP4, MXFP8 and MXFP4 under rceil/even (formats.py), with stats in their own format.
    aq, sa = quantize_in_format(a, gemm, a_is_gradient, r, what, with_stats=with_stats)
    bq, sb = quantize_in_format(b, gemm, False, r, what, is_weight=b_is_weight, with_stats=with_stats)
    return aq.to(out_dtype), bq.to(out_dtype), (sa, sb)


def _exact_dtype(gemm: dict, source: torch.dtype) -> torch.dtype:
    # The values a quantized operand holds: MXFP4, MXFP8, bf16 and fp8 values are exact in bf16;
    # NVFP4's (E2M1 · E4M3 · an FP32 tensor scale) are not.
    if gemm["precision"] == "nvfp4":
        return torch.float32
    return torch.bfloat16 if gemm["precision"] != "fp32" else source


def quantized_wgrad(layer: str, gemm: dict, dy: torch.Tensor, x: torch.Tensor, random: RandomSource,
                    capture: Optional[StepCapture], misfit: str = "pad") -> torch.Tensor:
    """∇Ŵ = ∇Yᵀ·X at the GEMM's precision, float32 (dy: [tokens, out], x: [tokens, in], both in the
    compute dtype); with a capture, E against the exact ∇W goes to its WgradErrors."""
    a, b = dy.t(), x.t()
    operand_dtype = dy.dtype if gemm["precision"] != "fp32" else torch.float32
    with_stats = capture is not None and capture.with_stats
    aq, bq, sums = gemm_operands(gemm, a, b, True, random, f"{layer} wgrad", operand_dtype, with_stats, a_row_major=True, misfit=misfit)
    dwq = mm_float32(aq, bq.t(), _exact_dtype(gemm, dy.dtype))
    if capture is not None:
        errors = capture.errors
        rows = errors.sampled_rows(layer, dwq.shape[0])
        stride = errors.row_stride
        # Sampled (wgradErrorRowStride > 1): ∇W of the rows 0, stride, … alone, against those of ∇Ŵ.
        dw = mm_float32(a[::stride], b.t(), dy.dtype)
        errors.add(layer, dwq[::stride].contiguous(), dw, 0, (rows, dwq.shape[1]))
        capture.observe_operands(layer, "wgrad", gemm, a, b, sums)
    return dwq


#: Rotations that give the same bits every call (no draw): an operand's MXFP4 can then be reused.
DETERMINISTIC_ROTATIONS = ("none", "hadamard", "fixed-sign-hadamard")


def deterministic(gemm: dict) -> bool:
    """Whether `gemm` is MXFP4 through mx_ops (floor scale rule) and a function of the operand alone
    (no random signs or uniforms): then an operand's MXFP4 can be reused."""
    return (gemm["precision"] == "mxfp4" and not uses_formats(gemm) and gemm["rotation"] in DETERMINISTIC_ROTATIONS
            and gemm["rounding"] != "stochastic")


def operand_sums(capture: StepCapture, layer: str, gemm_name: str, gemm: dict, operand: str, x: torch.Tensor) -> stats.OperandSums:
    """One operand's stats under a deterministic `gemm` (its rotation is the one its partner would share)."""
    what = f"{layer} {gemm_name} {operand}"
    draws = capture.random.draws(gemm, what, x)
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], x.shape[-1], x.device, draws, capture.misfit)
    return mx_ops.quantize_operand(x, gemm, r, draws, what, with_stats=True)[1]


def observed_wgrad(layer: str, gemm: dict, dy: torch.Tensor, x: torch.Tensor, capture: StepCapture, precision: Optional[str] = None,
                   shared: Optional[dict] = None) -> None:
    """E = ∇Ŵ − ∇W of an observed layer (dy: [tokens, out], x: [tokens, in]) and, on stats steps, the
    Wgrad operand stats. ∇Ŵ and ∇W are made in row chunks of E, so that neither they nor the
    quantized ∇Yᵀ ever take more than a chunk's memory (∇Yᵀ in parts of a chunk where E's chunks
    cannot follow the tokens: under torch.distributed, a layer whose calls are summed). Stochastic rounding
    gives a part of ∇Yᵀ the bits it gives those rows of the whole (draws.py: keyed to the whole ∇Yᵀ and Xᵀ).
    `shared`: a dict kept for the layers whose X is the same tensor (q, k and v of one attention):
    Xᵀ's MXFP4 values and stats are made by the first and reused (deterministic GEMMs only)."""
    tokens, out_features = dy.shape
    exact_in = _exact_dtype(gemm, dy.dtype)
    operand_dtype = dy.dtype if gemm["precision"] != "fp32" else torch.float32
    errors = capture.errors
    # wgradErrorRowStride > 1 (opt-in): E of the rows 0, stride, 2·stride, … of ∇W alone, so only those
    # rows of ∇Yᵀ enter the products. Under MXFP4 with nearest-even rounding a row's values do not
    # depend on its position: the kernel quantizes (and copies) the sampled rows alone, read in place,
    # and observe_operands makes the whole ∇Yᵀ's stats in a pass that writes nothing. Stochastic
    # rounding draws by position (draws.py), so there, and in the other formats, ∇Yᵀ is quantized
    # whole, part by part, as without a stride, and the products take its sampled rows.
    stride = errors.row_stride
    sampled = errors.sampled_rows(layer, out_features)
    rows = errors.rows_per_chunk(layer, out_features, x.shape[1], tokens)
    part = errors.rows_per_part(rows, tokens)
    what = f"{layer} wgrad"
    block = gemm["precision"] in BLOCK_PRECISIONS
    in_format = block and uses_formats(gemm)
    draws = capture.random.draws(gemm, what, dy.t(), x.t()) if block else None
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], tokens, dy.device, draws, capture.misfit) if block else None
    dy_amax = None
    if in_format:
        bq, sx = quantize_in_format(x.t(), gemm, False, r, what, with_stats=capture.with_stats)
        bq = bq.to(operand_dtype)
        if gemm["precision"] == "nvfp4":  # the tensor scale is ∇Yᵀ's (rotated), not a chunk's: one pass for its amax first
            dy_amax = max((finite_amax(rotate(dy[:, row0:row0 + rows].t(), r, what)) for row0 in range(0, out_features, rows)), key=float)
    elif block:
        reuse = shared is not None and deterministic(gemm)
        if reuse and "wgrad x" in shared:
            bq, sx = shared["wgrad x"]
        else:
            bq, sx = mx_ops.quantize_operand(x.t(), gemm, r, draws.for_operand(SALT_B), what, operand_dtype, capture.with_stats)
            if reuse:
                shared["wgrad x"] = (bq, sx)
    else:
        bq, _ = quantize_at_precision(x.t(), gemm, False, None, None, what)
        bq, sx = bq.to(operand_dtype), None
    sdy = None
    sampled_alone = stride > 1 and block and not in_format and gemm["rounding"] != "stochastic"
    # On CUDA the chunks of ∇Yᵀ add their stats into one row.
    row = mx_ops.stats_row(dy.device) if capture.with_stats and dy.is_cuda and block and not in_format and not sampled_alone else None
    # Rows of a part quantized (every step-th), and of those the rows the products take (every take-th).
    step, take = (stride, 1) if sampled_alone else (1, stride)
    for row0 in range(0, out_features, rows):
        row1 = min(out_features, row0 + rows)
        dwqs, dws = [], []
        for part0 in range(row0, row1, part):
            a = dy[:, part0:min(row1, part0 + part):step].t()
            if sampled_alone:
                aq, s, a = mx_ops.quantize_operand_and_copy(a, gemm, r, draws, what, operand_dtype)  # no stats: s is None
            elif in_format:
                aq, s = quantize_in_format(a, gemm, True, r, what, with_stats=capture.with_stats, tensor_amax=dy_amax)
                aq = aq.to(operand_dtype)
            elif block:
                aq, s, a = mx_ops.quantize_operand_and_copy(a, gemm, r, draws.from_row(part0), what, operand_dtype, capture.with_stats, row)
            else:
                aq, s = quantize_at_precision(a, gemm, True, None, None, what)
                aq = aq.to(operand_dtype)
            if s is not None:
                if sdy is not None and row is not None and s.counts.data_ptr() == row.data_ptr():
                    sdy = sdy._replace(elements=sdy.elements + s.elements, padded=sdy.padded + s.padded)
                else:
                    sdy = s if sdy is None else sdy.merged(s)
            dws.append(mm_float32(a[::take], x, dy.dtype))
            # An fp32 GEMM of bf16/fp32 operands is the exact product: E = 0 without a second product.
            dwqs.append(dws[-1] if gemm["precision"] == "fp32" else mm_float32(aq[::take], bq.t(), exact_in))
            del aq
        dwq, dw = (dwqs[0], dws[0]) if len(dws) == 1 else (torch.cat(dwqs), torch.cat(dws))
        del dwqs, dws
        errors.add(layer, dwq, dw, row0 // stride, (sampled, x.shape[1]))
        del dwq, dw
    capture.observe_operands(layer, "wgrad", gemm, dy.t(), x.t(), (sdy, sx), precision)

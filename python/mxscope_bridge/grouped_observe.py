"""Observed experts of a grouped GEMM, measured as a group on a capture step.

Expert by expert (experts.py splitting the grouped GEMM, each expert's GEMM its own product through
its hooks), a capture step cost about a millisecond of host time per expert layer: +146 % step time
at statsEvery 10 on a Qwen3-MoE-shaped model of 1,024 expert layers (+25-55 % measured as a group; docs/
bridge.md, "Larger batches of experts"). Here the trainer's grouped GEMM runs as it is,
and one gradient hook on its output measures the experts this step observes (all, or its layer
group's):

- The Wgrad error of all of them at once, a batch of experts at a time (so memory stays bounded):
  each expert's rows of ∇Y and X go to a slot of their own, all slots as long as the batch's
  longest stretch padded to the block, zeros after the rows (as the expert-by-expert way pads each
  expert's tokens), and ∇Yᵀ and Xᵀ are quantized, with their exact copies, in one launch each. The
  experts' ∇Ŵ and exact ∇W are float32 sums of their slots of those operands: the grouped GEMM's
  where it gives float32 outputs, else one batched product each, read in place. The batch's E then
  goes to WgradErrors as each expert's own layer's (one launch for all their sums, one hand-over to
  the host store), so the sums, sketches and lag-1 are the expert-by-expert way's (up to the order
  of the products' sums).
- The operand stats (stats steps only), each operand of all the experts in one launch
  (capture.observe_each: the Gluon stats kernel over a table of the experts' rows or stretches),
  with the stats of a launch per expert: W's in the hook (the optimizer may change the parameter in
  place before the worker runs), the rest on the backward worker, which takes one call's work at a
  time (it holds all the call's X and ∇Y).

Only where that gives the same telemetry: MXFP4 with nearest-even rounding and no rotation or a
fixed Hadamard one (no random bits: a grouped call would draw other bits than each expert's own), one
Wgrad per step (no micro-batches summed, no repeated call, no row sampling), one process's own
error (no reduction across ranks in backward), no activation checkpointing, and an expert's E within
one chunk (wgrad_error.CHUNK_BYTES). Otherwise the experts are split as before."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.nn.utils.rnn import pad_sequence

from .capture import StepCapture, fixed_mxfp4, in_backward, mm_float32
from .config import GEMM_KINDS
from .draws import SALT_A, SALT_B
from .grouped_emulation import float32_sums, unsplit_stretch
from .mx_ops import quantize_operand_and_copy
from .observe import measured_gemms, ran_at, saved_tensor_hooks_active
from .rotation import make_rotation, padded_length
from .wgrad_error import CHUNK_BYTES

if TYPE_CHECKING:  # pragma: no cover
    from .bridge import Bridge
    from .experts import ExpertSlice

#: Bytes of ∇Y's and X's spread copies, their quantized and exact values and the float32 ∇Ŵ, ∇W and
#: E_{t−1} of one batch of experts. A batch costs the worker's host about a millisecond whatever its
#: size: at 256 MiB (5 up-projection experts of a Qwen3-30B-A3B-shaped block) a MoE capture step ran
#: ~180 batches; at 512 MiB its capture steps took a fifth to a third less time, peak memory still
#: plain's (H200); 1 GiB gained nothing more (docs/bridge.md, "Larger batches of experts").
BATCH_BYTES = 8 * CHUNK_BYTES

def _groupable(gemm: dict, misfit: str) -> bool:
    # "skip" leaves the rotation out for an expert whose token count the block does not divide (as
    # grouped_emulation.groupable): one rotation of all the experts' tokens would not.
    return fixed_mxfp4(gemm) and (gemm["rotation"] == "none" or misfit != "skip")


def observing_bridge(experts: Sequence["ExpertSlice"]) -> Optional["Bridge"]:
    """The bridge observing some of the experts, if the only hooks of each are that bridge's
    observing hooks or none (experts outside a stats step's layer group have none)."""
    found = None
    for expert in experts:
        if not expert.forward_hooks and not expert.pre_hooks:
            continue
        if len(expert.forward_hooks) != 1 or len(expert.pre_hooks) != 1 or getattr(expert, "_mxscope_emulation", None) is not None:
            return None
        bridge = getattr(expert.forward_hooks[0], "mxscope_bridge", None)
        if bridge is None or getattr(expert.pre_hooks[0], "mxscope_bridge", None) is not bridge or found not in (None, bridge):
            return None
        found = bridge
    return found


def _measurable(bridge: "Bridge", names: List[str], x: torch.Tensor, weights: torch.Tensor, out_features: int, in_features: int) -> bool:
    """Whether the experts `names` of a grouped call can be measured as a group (the module's docstring)."""
    capture = bridge.capture
    if capture is None or not torch.is_grad_enabled() or in_backward() or saved_tensor_hooks_active():
        return False
    if not (x.requires_grad and weights.requires_grad) or x.dim() != 2:
        return False
    errors = capture.errors
    if errors.world != 1 or errors.micro_batches != 1 or errors.row_stride != 1 or any(name in errors.repeated for name in names):
        return False
    if not all(capture.observes(name) for name in names) or out_features * in_features * 4 > CHUNK_BYTES:
        return False
    gemms = measured_gemms(bridge.config)
    return all(_groupable(gemms[kind], capture.misfit) for kind in GEMM_KINDS)


def observe_grouped(experts: Sequence["ExpertSlice"], x: torch.Tensor, weights: torch.Tensor, ends: List[int], call: Callable,
                    args, kwargs) -> Optional[torch.Tensor]:
    """The trainer's grouped GEMM `call(*args, **kwargs)` (x [rows, in] by weights [E, in, out], rows
    split at `ends`) with the experts a bridge observes measured as a group; None where they cannot
    be (split them)."""
    bridge = observing_bridge(experts)
    if bridge is None:
        return None
    starts = [0] + ends[:-1]
    observed = [(expert, expert.forward_hooks[0].mxscope_layer, start, end) for expert, start, end in zip(experts, starts, ends) if expert.forward_hooks]
    if not _measurable(bridge, [name for _, name, _, _ in observed], x, weights, *experts[0].weight.shape):
        return None
    capture = bridge.capture
    y = call(*args, **kwargs)
    # An expert no token reached has no GEMM, as in the eager loop: it reports nothing this step.
    reached = [part for part in observed if part[3] > part[2]]
    for _, name, _, _ in reached:
        capture.forward_call(name)
    ran = {kind: ran_at(bridge._declared, kind, y) for kind in GEMM_KINDS}
    # Taken when the hook runs, or the hook (alive as long as autograd's graph, until the trainer
    # drops its loss) would keep every call's X through the optimizer step: 1.4 GiB on an H200 bench.
    slot = bridge.observing.hold(x.detach())

    def on_grad(dy: torch.Tensor) -> None:
        if bridge.capture is not capture or not reached or not slot:
            return None
        x = slot.pop()
        capture.backward_begun = True
        gemms = measured_gemms(bridge.config)
        where = f"the experts of {reached[0][1]}'s call"
        if capture.with_stats:  # W now: the worker may run after an optimizer step changed it in place
            capture.measure(where, _measure_weights, capture, reached, x.dtype, gemms, ran)
        parts = [(name, start, end) for _, name, start, end in reached]
        worker = bridge.backward_worker
        args = (bridge.config, capture, parts, x, dy.detach(), ran, call)
        if worker is None:
            capture.measure(where, _measure, *args)
        else:
            # A call's X and ∇Y (all its experts' rows: 470 MB for a Qwen3-30B-A3B-shaped block's
            # up projection at 8 × 1024 tokens) are held until its work has run: one call's at a time
            # beyond what autograd holds itself, not the worker queue's depth plus the one running.
            # Measured on an H200: the step times did not move.
            worker.drain()
            worker.submit(dy.device, capture.measure, where, _measure, *args)
        return None

    y.register_hook(on_grad)
    return y


def _measure_weights(capture: StepCapture, reached: list, dtype: torch.dtype, gemms: Dict[str, dict], ran: Dict[str, str]) -> None:
    """W's stats of each expert of the call (stats steps), in the hook."""
    names = [name for _, name, _, _ in reached]
    weights = [expert.weight.detach() for expert, _, _, _ in reached]
    if weights[0].dtype == dtype:  # slices of the stacked parameter: one launch each for all
        capture.observe_each(names, "fprop", gemms["fprop"], None, weights, precision=ran["fprop"])
        capture.observe_each(names, "dgrad", gemms["dgrad"], None, [w.t() for w in weights], precision=ran["dgrad"])
    else:  # each in X's dtype, one at a time (all experts' copies at once could take a GiB)
        for name, weight in zip(names, weights):
            weight = weight.to(dtype)
            capture.observe_operands(name, "fprop", gemms["fprop"], None, weight, precision=ran["fprop"])
            capture.observe_operands(name, "dgrad", gemms["dgrad"], None, weight.t(), precision=ran["dgrad"])


def _measure(config: dict, capture: StepCapture, parts: List[Tuple[str, int, int]], x: torch.Tensor, dy: torch.Tensor,
             ran: Dict[str, str], call: Callable) -> None:
    """The backward worker's part (observe._observe's for a group of experts): X's and ∇Y's stats of
    each expert (stats steps), and every expert's Wgrad error with its operands' stats."""
    gemms = measured_gemms(config)
    x = x.to(dy.dtype)
    if capture.with_stats:
        names = [name for name, _, _ in parts]
        capture.observe_each(names, "fprop", gemms["fprop"], [x[start:end] for _, start, end in parts], None, precision=ran["fprop"])
        capture.observe_each(names, "dgrad", gemms["dgrad"], [dy[start:end] for _, start, end in parts], None, precision=ran["dgrad"])
    for batch in _batches(parts, dy.shape[1], x.shape[1], unsplit_stretch(gemms["wgrad"])):
        _wgrad_errors(capture, gemms["wgrad"], batch, x, dy, call, ran["wgrad"])


def _batches(parts: List[Tuple[str, int, int]], out_features: int, in_features: int, block: int) -> List[List[Tuple[str, int, int]]]:
    """Consecutive experts whose spread operands (a copy, the quantized values and the exact ones, each
    expert in a slot of the batch's longest padded stretch) and float32 ∇Ŵ, ∇W and E_{t−1} stay
    within BATCH_BYTES (at least one each)."""
    batches, batch, slot = [], [], 0
    for part in parts:
        longest = max(slot, padded_length(part[2] - part[1], block))
        size = (len(batch) + 1) * (longest * (out_features + in_features) * 2 * 3 + out_features * in_features * 4 * 3)
        if batch and size > BATCH_BYTES:
            batches.append(batch)
            batch, longest = [], padded_length(part[2] - part[1], block)
        batch.append(part)
        slot = longest
    if batch:
        batches.append(batch)
    return batches


def _wgrad_errors(capture: StepCapture, gemm: dict, batch: List[Tuple[str, int, int]], x: torch.Tensor, dy: torch.Tensor,
                  call: Callable, precision: str) -> None:
    """E = ∇Ŵ − ∇W of a batch of consecutive experts, each to WgradErrors as its own layer's (all in
    one call), and on stats steps each expert's ∇Yᵀ and Xᵀ stats."""
    names = [name for name, _, _ in batch]
    first, last = batch[0][1], batch[-1][2]
    counts = [end - start for _, start, end in batch]
    # A layer group's experts need not be next to each other: their rows are gathered first.
    adjacent = all(one[2] == other[1] for one, other in zip(batch, batch[1:]))
    rows = (lambda t: t[first:last]) if adjacent else (lambda t: torch.cat([t[start:end] for _, start, end in batch]))
    block = unsplit_stretch(gemm)
    # Every expert in a slot of one length: the products are then one batched product of strided views.
    slot = max(padded_length(count, block) for count in counts)
    # E_{t−1} comes to the GPU while the operands are quantized and multiplied.
    capture.errors.prefetch(names, dy.shape[1], dy.device)
    dy_spread, x_spread = _slots(rows(dy), counts, slot), _slots(rows(x), counts, slot)
    offs = torch.arange(1, len(counts) + 1, device=dy.device, dtype=torch.int32) * slot
    what = f"{names[0]} wgrad"
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], dy_spread.shape[0], dy.device, None, capture.misfit)
    draws = capture.random.draws(gemm, what, dy_spread.t())
    dyq, _, dy_t = quantize_operand_and_copy(dy_spread.t(), gemm, r, draws.for_operand(SALT_A), what, dy.dtype)  # [out, tokens]
    xq, _, x_t = quantize_operand_and_copy(x_spread.t(), gemm, r, draws.for_operand(SALT_B), what, dy.dtype)  # [in, tokens]
    del dy_spread, x_spread
    shape = (dy.shape[1], x.shape[1])
    dwq = _products(call, dyq, xq, offs, slot)
    del dyq, xq
    capture.errors.add_experts(names, dwq, _products(call, dy_t, x_t, offs, slot), shape)
    del dwq
    if capture.with_stats:
        # Each expert's tokens padded to the Hadamard block, as the expert-by-expert way quantizes them
        # (the spread's zeros are that padding): the same operands, read in place.
        hadamard = gemm["hadamardBlock"] if r is not None else 1
        stretches = [slice(e * slot, e * slot + padded_length(count, hadamard)) for e, count in enumerate(counts)]
        capture.observe_each(names, "wgrad", gemm, [dy_t[:, s] for s in stretches], [x_t[:, s] for s in stretches], precision=precision)


def _slots(rows: torch.Tensor, counts: List[int], slot: int) -> torch.Tensor:
    """rows [Σcounts, n] (one row per routed token) with expert e's rows starting at e·slot, zeros
    between: [len(counts)·slot, n]. Made on rows' device: an index built on the host would come to
    the GPU from pageable memory, a copy that waits for the GPU to finish what it was given."""
    # A zero stretch of the slot's length after the experts' rows: pad_sequence then pads every expert
    # to the slot itself, where padding to the longest expert and then to the slot copied it all twice.
    filler = rows.new_zeros(1, rows.shape[1]).expand(slot, -1)
    return pad_sequence([*rows.split(counts), filler], batch_first=True)[:-1].reshape(-1, rows.shape[1])


def _products(call: Callable, a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, slot: int) -> torch.Tensor:
    """Each group's a[:, e·slot:(e+1)·slot] · b[:, e·slot:(e+1)·slot]ᵀ, [groups, m, n] summed in float32
    (a [m, groups·slot], b [n, groups·slot], both row-major): by the grouped GEMM where it gives
    float32 sums of these operands; else on CUDA one batched product of strided views of them (bmm's
    float32 output of bf16 operands: one call where a product per group cost ~30 µs of host time
    each, 2,048 a step on the H200 MoE bench); else a product per group. The values of bf16 operands
    are exact in each."""
    grouped = float32_sums(call, a, b.t(), offs)
    if grouped is not None:
        return grouped
    groups = a.shape[1] // slot
    a3 = a.view(a.shape[0], groups, slot).transpose(0, 1)  # [groups, m, slot]
    b3 = b.view(b.shape[0], groups, slot).permute(1, 2, 0)  # [groups, slot, n]
    if a.is_cuda and a.dtype in (torch.bfloat16, torch.float16):
        try:
            return torch.bmm(a3, b3, out_dtype=torch.float32)
        except (TypeError, RuntimeError):  # torch before bmm's out_dtype
            pass
    return torch.stack([mm_float32(p, q, a.dtype) for p, q in zip(a3, b3)])

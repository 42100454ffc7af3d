"""Observing a GEMM the trainer runs itself: a forward hook on the module (through its LinearLike
adapter) and a tensor hook on Y, where ∇Y arrives; the operand stats and the Wgrad error are what
the run config's block format (MXFP4 where it names none) with its rotation and rounding would do
to those operands (`simulated`), and the records carry the precision the GEMM really ran at. The
hooks return at once except on the steps that capture.

All of a layer's telemetry is computed in its backward, when ∇Y arrives: fprop (X, W), dgrad (∇Y,
Wᵀ) and the Wgrad error. For an nn.Linear, X and W are the tensors its GEMM saved for backward
(under autocast: the bf16 copies the GEMM consumed), read from its autograd node, so observing keeps
no activation alive that autograd does not keep anyway. Other modules keep X from the forward hook.
A layer with no Wgrad (a frozen weight) has its Fprop measured in the forward instead, and keeps no X.

Activation checkpointing saves nothing in the first forward and runs the forward again inside
backward. There, the forward pre-hook hands the recomputed input to the layer (and a ∇Y that came
first waits for it), so each micro-batch is observed once and only one checkpointed segment's
inputs are held."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import torch

from .capture import StepCapture, compute_dtype, deterministic, in_backward, measured_gemm, observed_wgrad, operand_sums
from .config import GEMM_KINDS
from .layers import DEFAULT_ADAPTER, LinearLike
from .precision import PRECISIONS

if TYPE_CHECKING:  # pragma: no cover
    from .bridge import Bridge

#: What an observed GEMM ran at, by the dtype of its output, when the trainer declares nothing
#: (protocol v1 has no fp16: fp16 GEMMs read as the 16-bit bf16; declare precision= to say otherwise).
DTYPE_PRECISION = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "bf16"}


def declared_precisions(precision) -> Dict[str, str]:
    """`precision=`: one precision for every GEMM, or {gemm: precision}; None infers from dtypes."""
    if precision is None:
        return {}
    per_gemm = {kind: precision for kind in GEMM_KINDS} if isinstance(precision, str) else dict(precision)
    for kind, value in per_gemm.items():
        if kind not in GEMM_KINDS:
            raise ValueError(f"precision: {kind!r} is not a GEMM; use {', '.join(GEMM_KINDS)}")
        if value not in PRECISIONS:
            raise ValueError(f"precision.{kind}: {value!r} is not one of {', '.join(PRECISIONS)} (what the GEMM really runs at)")
    return per_gemm


def measured_gemms(config: dict) -> Dict[str, dict]:
    """What the run config's GEMMs measure, observed: each its block format, MXFP4 for fp32, bf16 or fp8."""
    return {kind: measured_gemm(g) for kind, g in config["gemms"].items()}


def ran_at(declared: Dict[str, str], gemm: str, output: torch.Tensor) -> str:
    return declared.get(gemm) or DTYPE_PRECISION.get(output.dtype, "fp32")


_MATMUL_NODES = {"AddmmBackward0": ("_saved_mat1", "_saved_mat2"), "MmBackward0": ("_saved_self", "_saved_mat2")}
_VIEW_NODES = {"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "TBackward0"}


def saved_tensor_hooks_active() -> bool:
    # Checkpointing packs saved tensors through saved-tensor hooks: reading them from the node would
    # unpack them a second time, which torch.utils.checkpoint forbids.
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    if top is None:
        return False
    try:
        return top(True) is not None
    except TypeError:
        return top() is not None


def matmul_node(output: torch.Tensor, in_features: int):
    """The matmul autograd node of a linear layer's output, with the attribute names of X and Wᵀ."""
    node = output.grad_fn
    for _ in range(3):
        if node is None:
            return None
        name = node.name()
        if name in _MATMUL_NODES:
            return node, _MATMUL_NODES[name]
        if name not in _VIEW_NODES or not node.next_functions:
            return None
        node = node.next_functions[0][0]
    return None


_MATMUL_X_INPUT = {"AddmmBackward0": 1, "MmBackward0": 0}


def x_source(node) -> Optional[tuple]:
    """What X of a matmul node is made from: the autograd node (and output) it comes from through
    views and casts, with their names. Layers whose X has the same source, chain, shape and dtype
    (q, k and v reading one normalized input, each through autocast's own bf16 copy) multiply the
    same values. An in-place change gives the tensor a new node, so it never matches the old one."""
    fn, output = node.next_functions[_MATMUL_X_INPUT[node.name()]]
    chain = []
    while fn is not None and (fn.name() in _VIEW_NODES or fn.name() == "ToCopyBackward0") and len(chain) < 4 and fn.next_functions:
        chain.append(fn.name())
        fn, output = fn.next_functions[0]
    if fn is None or fn.name() == "AccumulateGrad":
        return None
    return ("node", fn, output, tuple(chain))


def tensor_source(x: torch.Tensor) -> tuple:
    """The same tensor (storage, view and version) read twice: the module input of a checkpoint recompute."""
    return ("tensor", x.data_ptr(), tuple(x.shape), x.stride(), x._version, x.dtype)


class ObserveState:
    """What the hooks carry within one capturing step (a fresh one every step)."""

    def __init__(self):
        #: module id -> (recomputed input, compute dtype) of a checkpoint recompute
        self.recomputed: Dict[int, Tuple[torch.Tensor, torch.dtype]] = {}
        #: module id -> ∇Y that arrived before the checkpoint recomputed the module
        self.waiting: Dict[int, List[torch.Tensor]] = {}
        #: modules whose output got a gradient hook in this step's forward
        self.registered = set()
        #: modules with no Wgrad (a frozen weight) whose Fprop was measured in this step's forward
        self.fprop_done = set()
        #: the last X source seen in backward, what it holds alive, and the MXFP4 of X reused by
        #: the layers that share it (they run one after another in backward)
        self._source: Optional[tuple] = None
        self._held = None
        self._shared: dict = {}
        #: what this step's gradient hooks hold (their matmul node or a kept X), each in a one-item
        #: list the hook empties when it runs, or the step's end does: a hook lives as long as the
        #: graph (until the trainer drops its loss), and a hook registered on its own node's output
        #: made a cycle (node → hook → node) that kept the step's tensors until a garbage collection
        self._slots: List[list] = []

    def hold(self, value) -> list:
        """A one-item list holding `value` until its hook pops it or `release` empties it."""
        slot = [value]
        self._slots.append(slot)
        return slot

    def release(self) -> None:
        """Lets go of everything the step's hooks held (at its end, once its backward work has run)."""
        for slot in self._slots:
            slot.clear()
        self._slots.clear()
        self._source, self._held, self._shared = None, None, {}
        self.recomputed.clear()
        self.waiting.clear()

    def shared_for(self, source: Optional[tuple], held) -> Optional[dict]:
        """The reuse slot of layers whose X comes from `source` (None: nothing to share)."""
        if source is None:
            return None
        if source != self._source:
            self._source, self._held, self._shared = source, held, {}
        return self._shared


def observer_pre_hook(bridge: "Bridge", name: str, adapter: LinearLike):
    """Inside a checkpoint recompute: hands the recomputed input to the layer's backward-time work
    (plain layers only: an adapter's GEMM input is not the module's input)."""
    def pre_hook(module, inputs):
        state = bridge.observing
        if bridge.capture is None or not in_backward() or getattr(module, "_mxscope_emulation", None) is not None:
            return
        if adapter is not DEFAULT_ADAPTER or not inputs or not isinstance(inputs[0], torch.Tensor):
            return
        x = inputs[0].detach()
        dtype = compute_dtype(x)
        waiting = state.waiting.pop(id(module), ())
        for dy, ran, gemms in waiting:
            _dispatch(bridge, name, module, adapter, x, None, dy, dtype, ran, gemms=gemms)
        if not waiting and id(module) in state.registered:
            state.recomputed[id(module)] = (x, dtype)
    pre_hook.mxscope_bridge = bridge
    return pre_hook


def observer_hook(bridge: "Bridge", name: str, adapter: LinearLike):
    """The forward hook observing layer `name` on capture steps (emulated layers report themselves).
    Only the GEMMs autograd runs are measured: a frozen weight (LoRA's base layer, a frozen
    encoder) has no Wgrad, an input that needs no gradient (token data) no Dgrad, and a layer whose
    output needs no gradient has its Fprop alone, measured here since no backward will come."""
    def hook(module, inputs, output):
        capture, state = bridge.capture, bridge.observing
        if capture is None or not torch.is_grad_enabled() or getattr(module, "_mxscope_emulation", None) is not None:
            return
        y = adapter.output(output)
        if y is None:
            return
        if in_backward() and (id(module) in state.registered or id(module) in state.fprop_done):
            return  # a non-reentrant checkpoint recompute: its output gets no gradient
        ran = {kind: ran_at(bridge._declared, kind, y) for kind in GEMM_KINDS}
        x_in = adapter.gemm_input(module, inputs, output)
        runs_dgrad = x_in.requires_grad
        if not y.requires_grad or not adapter.weight(module).requires_grad:
            # Fprop ran and no Wgrad will: Fprop's stats now, from X at hand, so backward keeps no X.
            if not capture.with_stats:  # the step before a stats step keeps Wgrad errors only
                return
            state.fprop_done.add(id(module))
            _dispatch(bridge, name, module, adapter, x_in.detach(), None, None, compute_dtype(x_in), ran, gemms=("fprop",))
            if not y.requires_grad or not runs_dgrad:
                return

            def on_dgrad(dy: torch.Tensor) -> Optional[torch.Tensor]:
                if bridge.capture is capture:
                    capture.backward_begun = True
                    _dispatch(bridge, name, module, adapter, None, None, dy.detach(), None, ran, gemms=("dgrad",))
                return None
            y.register_hook(on_dgrad)
            return
        gemms = GEMM_KINDS if runs_dgrad else ("fprop", "wgrad")
        if not in_backward():
            state.registered.add(id(module))
            capture.forward_call(name)
        plain = adapter is DEFAULT_ADAPTER
        checkpointed = saved_tensor_hooks_active()
        found = matmul_node(y, 0) if plain and not checkpointed else None
        if found is not None and getattr(found[0], found[1][0]) is None:  # X is saved only when W needs a gradient
            found = None
        kept = None
        if found is None and not (plain and checkpointed):
            x = x_in.detach()
            kept = (x, compute_dtype(x))
        # Taken by the hook when it runs: autograd's graph lives on until the trainer drops its loss
        # (after the optimizer step), and the hook with it, but a kept X must not.
        slot = state.hold((found, kept))

        def on_grad(dy: torch.Tensor) -> Optional[torch.Tensor]:
            if bridge.capture is not capture or not slot:
                return None
            capture.backward_begun = True
            dy = dy.detach()
            recomputed = state.recomputed.pop(id(module), None)
            found, kept = slot.pop()
            if found is not None:
                node, (x_name, w_name) = found
                w_t = getattr(node, w_name)  # Wᵀ is saved only when X needs a gradient
                _dispatch(bridge, name, module, adapter, getattr(node, x_name), w_t.t() if w_t is not None else None, dy, None, ran,
                          x_source(node), node, gemms)
            elif recomputed is not None:
                _dispatch(bridge, name, module, adapter, recomputed[0], None, dy, recomputed[1], ran, gemms=gemms)
            elif kept is not None:
                _dispatch(bridge, name, module, adapter, kept[0], None, dy, kept[1], ran, gemms=gemms)
            else:  # the checkpoint has not recomputed this layer yet: its pre-hook takes ∇Y then
                state.waiting.setdefault(id(module), []).append((dy, ran, gemms))
            return None
        y.register_hook(on_grad)
    # Whose hook this is: experts hooked by nothing else can be measured as a group (grouped_observe.py).
    hook.mxscope_bridge, hook.mxscope_layer = bridge, name
    return hook


def _dispatch(bridge: "Bridge", name: str, module, adapter: LinearLike, x: Optional[torch.Tensor], weight: Optional[torch.Tensor],
              dy: Optional[torch.Tensor], dtype: Optional[torch.dtype], ran: Dict[str, str], source: Optional[tuple] = None, held=None,
              gemms: Tuple[str, ...] = GEMM_KINDS) -> None:
    """A layer's telemetry for the GEMMs in `gemms` (x is None without Fprop and Wgrad, dy without
    Dgrad and Wgrad): on the bridge's backward worker when it has one, else here."""
    module_weight = adapter.weight(module)
    if weight is None:  # read now: the trainer may change the weight once backward is done
        weight = module_weight.detach()
    x, dy = _whole_local(x, dy, module_weight)
    x, weight, dy = _whole(x), _whole(weight), _whole(dy)
    worker = bridge.backward_worker
    if worker is not None and module_weight.requires_grad and (hasattr(module_weight, "placements") or _memory_of(weight) == _memory_of(module_weight)):
        # The worker may read W after backward has returned and an optimizer step has updated the
        # parameter in place (fp32 or bf16 weights without autocast, whose GEMM saved W itself), or
        # after FSDP2 has freed the unsharded weight autograd saved (a DTensor parameter's W is
        # FSDP's or tensor parallelism's to free or gather again, not the hook's to keep).
        weight = weight.clone()
    capture = bridge.capture
    args = (bridge.config, capture, bridge.observing, name, x, weight, dy, dtype, ran, source, held, gemms)
    if worker is None:
        capture.measure(name, _observe, *args)
    else:
        worker.submit((dy if dy is not None else x).device, capture.measure, name, _observe, *args)


def _memory_of(t: torch.Tensor) -> int:
    """The address of the storage behind t (a DTensor's local shard): views of one tensor share it."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.untyped_storage().data_ptr() if hasattr(local, "untyped_storage") else local.storage().data_ptr()


def _whole(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """A DTensor operand as the whole tensor, so the stats are the unsharded layer's: FSDP2's weight
    outside its unshard window, and tensor parallelism's sharded weights, inputs and gradients. A
    sharded one is all-gathered (every rank's backward reaches its hooks in the same order); a
    replicated one is already whole. The kernels below read plain tensors only."""
    return t.full_tensor() if t is not None and hasattr(t, "full_tensor") else t


def _whole_local(x: Optional[torch.Tensor], dy: Optional[torch.Tensor], weight: torch.Tensor):
    """Tensor parallelism hands a sharded layer plain local tensors where its weight is sharded: a
    column-parallel layer (weight Shard(0)) sees its slice of ∇Y's last dimension, a row-parallel one
    (Shard(1)) its slice of X's. Those are gathered along the last dimension, over the weight's mesh."""
    placements = getattr(weight, "placements", None)
    if placements is None or len(placements) != 1 or not placements[0].is_shard():
        return x, dy
    from torch.distributed.tensor import DTensor, Shard
    dim = placements[0].dim
    if dim == 0 and dy is not None and not hasattr(dy, "placements") and dy.shape[-1] != weight.shape[0]:
        dy = DTensor.from_local(dy, weight.device_mesh, [Shard(dy.dim() - 1)]).full_tensor()
    elif dim == 1 and x is not None and not hasattr(x, "placements") and x.shape[-1] != weight.shape[1]:
        x = DTensor.from_local(x, weight.device_mesh, [Shard(x.dim() - 1)]).full_tensor()
    return x, dy


def _observe(config: dict, capture: StepCapture, state: ObserveState, name: str, x: Optional[torch.Tensor], weight: torch.Tensor,
             dy: Optional[torch.Tensor], dtype: Optional[torch.dtype], ran: Dict[str, str], source: Optional[tuple] = None, held=None,
             gemms_run: Tuple[str, ...] = GEMM_KINDS) -> None:
    gemms = measured_gemms(config)
    if x is None:  # Dgrad alone (a frozen weight)
        weight = weight.to(dy.dtype)
        capture.observe_operands(name, "dgrad", gemms["dgrad"], dy.reshape(-1, dy.shape[-1]), weight.t(), precision=ran["dgrad"])
        return
    if source is None:  # X kept from the forward or recomputed: the module input itself
        source, held = tensor_source(x), x
    if dtype is not None:
        x = x.to(dtype)
    weight = weight.to(x.dtype)
    x2 = x.reshape(-1, x.shape[-1])
    if dy is None:  # Fprop alone, measured in the forward
        capture.observe_operands(name, "fprop", gemms["fprop"], x2, weight, precision=ran["fprop"])
        return
    dy2 = dy.reshape(-1, dy.shape[-1])
    shared = state.shared_for(source + (tuple(x2.shape), x2.dtype, dy2.dtype), held)
    sx = None
    if capture.with_stats and shared is not None and deterministic(gemms["fprop"]):
        sx = shared.get("fprop x")
        if sx is None:
            sx = shared["fprop x"] = operand_sums(capture, name, "fprop", gemms["fprop"], "x", x2)
    capture.observe_operands(name, "fprop", gemms["fprop"], x2, weight, (sx, None), precision=ran["fprop"])
    if "dgrad" in gemms_run:
        capture.observe_operands(name, "dgrad", gemms["dgrad"], dy2, weight.t(), precision=ran["dgrad"])
    observed_wgrad(name, gemms["wgrad"], dy2, x2.to(dy2.dtype), capture, ran["wgrad"], shared)

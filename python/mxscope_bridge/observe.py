"""Hooks that observe nn.Linear-like layers on the steps that capture (and on no other step).

All of a layer's telemetry is computed in its backward, when ∇Y arrives: fprop (X, W), dgrad (∇Y,
Wᵀ) and the Wgrad error. X and W are the tensors the layer's own GEMM saved for its backward (under
autocast: the bf16 copies the GEMM consumed), read from its autograd node, so observing keeps no
activation alive that autograd does not keep anyway.

Activation checkpointing saves nothing in the first forward and runs the forward again inside
backward. There, the forward pre-hook hands the recomputed input to the layer (and a ∇Y that came
first waits for it), so each micro-batch is observed once and only one checkpointed segment's
inputs are held. Layers whose node is not a plain matmul keep their input from the forward hook.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch

from .capture import StepCapture, observed_wgrad

_MATMUL_NODES = {"AddmmBackward0": ("_saved_mat1", "_saved_mat2"), "MmBackward0": ("_saved_self", "_saved_mat2")}
_VIEW_NODES = {"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "TBackward0"}


def _in_backward() -> bool:
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


def _saved_tensor_hooks_active() -> bool:
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


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    if x.is_cuda and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    return x.dtype


class Observer:
    """Forward hooks on `layers`, attached for one capturing step at a time."""

    def __init__(self, layers: List[Tuple[str, torch.nn.Module]], gemms: Callable[[], Dict[str, dict]]):
        self.layers = layers
        self.gemms = gemms
        self.capture: Optional[StepCapture] = None
        self._handles = []
        #: module -> input of a checkpoint recompute; module -> ∇Y waiting for it
        self._recomputed: Dict[int, Tuple[torch.Tensor, torch.dtype]] = {}
        self._waiting: Dict[int, List[torch.Tensor]] = {}
        #: modules whose output got a gradient hook in this step's forward
        self._registered = set()

    def attach(self, capture: StepCapture) -> None:
        self.capture = capture
        if self._handles:
            return
        for name, module in self.layers:
            self._handles.append(module.register_forward_pre_hook(self._pre_hook(name)))
            self._handles.append(module.register_forward_hook(self._hook(name)))

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self.capture = [], None
        self._recomputed, self._waiting, self._registered = {}, {}, set()

    def _pre_hook(self, name: str):
        def pre_hook(module, inputs):
            if self.capture is None or not _in_backward() or not inputs or not isinstance(inputs[0], torch.Tensor):
                return
            x = inputs[0].detach()
            dtype = _compute_dtype(x)
            waiting = self._waiting.pop(id(module), ())
            for dy in waiting:
                self._observe(name, module, x, None, dy, dtype)
            if not waiting and id(module) in self._registered:
                self._recomputed[id(module)] = (x, dtype)
        return pre_hook

    def _hook(self, name: str):
        def hook(module, inputs, output):
            capture = self.capture
            if capture is None or not torch.is_grad_enabled() or not isinstance(output, torch.Tensor) or not output.requires_grad:
                return
            if _in_backward() and id(module) in self._registered:
                return  # a non-reentrant checkpoint recompute: its output gets no gradient
            if not _in_backward():
                self._registered.add(id(module))
            checkpointed = _saved_tensor_hooks_active()
            found = None if checkpointed else matmul_node(output, inputs[0].shape[-1])
            if found is not None and getattr(found[0], found[1][0]) is None:  # X is saved only when W needs a gradient
                found = None
            kept = None if checkpointed or found is not None else (inputs[0].detach(), _compute_dtype(inputs[0]))

            def on_grad(dy):
                if self.capture is not capture:
                    return
                dy = dy.detach()
                recomputed = self._recomputed.pop(id(module), None)
                if found is not None:
                    node, (x_name, w_name) = found
                    x, w_t = getattr(node, x_name), getattr(node, w_name)  # Wᵀ is saved only when X needs a gradient
                    self._observe(name, module, x, w_t.t() if w_t is not None else None, dy, None)
                elif recomputed is not None:
                    self._observe(name, module, recomputed[0], None, dy, recomputed[1])
                elif kept is not None:
                    self._observe(name, module, kept[0], None, dy, kept[1])
                else:  # the checkpoint has not recomputed this layer yet: its pre-hook takes ∇Y then
                    self._waiting.setdefault(id(module), []).append(dy)
            output.register_hook(on_grad)
        return hook

    def _observe(self, name: str, module, x: torch.Tensor, weight: Optional[torch.Tensor], dy: torch.Tensor, dtype: Optional[torch.dtype]) -> None:
        capture = self.capture
        if weight is None:
            weight = module.weight.detach()
            if hasattr(weight, "full_tensor"):  # a DTensor (FSDP2 outside its unshard window)
                weight = weight.full_tensor()
        if dtype is not None:
            x = x.to(dtype)
        weight = weight.to(x.dtype)
        x2 = x.reshape(-1, x.shape[-1])
        dy2 = dy.reshape(-1, dy.shape[-1])
        gemms = self.gemms()
        capture.observe_operands(name, "fprop", gemms["fprop"], x2, weight)
        capture.observe_operands(name, "dgrad", gemms["dgrad"], dy2, weight.t())
        observed_wgrad(name, gemms["wgrad"], dy2, x2.to(dy2.dtype), capture)

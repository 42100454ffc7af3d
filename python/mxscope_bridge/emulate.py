"""Emulated low-precision training: nn.Linear layers whose three GEMMs (Fprop X·Wᵀ, Dgrad ∇Y·W,
Wgrad ∇Yᵀ·X) each fake-quantize their operands at their own GemmConfig, through one autograd Function.

Quantized operands are exact in bf16, so the GEMMs themselves run in the model's compute dtype.
"""
from __future__ import annotations

import types
from typing import Dict, Optional

import torch

from .capture import StepCapture, compute_dtype, gemm_operands, in_backward, quantized_wgrad
from .config import default_gemms
from .compile_stance import eager
from .experts import ExpertSlice
from .layers import clean_name, is_transposed_linear, own_weights
from .draws import RandomSource


class Emulation:
    """The GEMM configs every emulated layer reads at each call (switch them between runs), the
    seed of random rotations and stochastic rounding, and the capture the bridge sets."""

    def __init__(self, gemms: Optional[Dict[str, dict]] = None, seed: int = 0, misfit: str = "pad"):
        self.gemms = gemms or default_gemms()
        #: what a Hadamard block that does not divide a reduction dimension does (rotation.MISFITS)
        self.misfit = misfit
        self.random = RandomSource(seed)
        self.capture: Optional[StepCapture] = None
        self.layers: Dict[str, torch.nn.Linear] = {}
        #: False runs the layers as plain nn.Linear (a benchmark's baseline steps in the same process)
        self.enabled = True


def emulated_gemm(layer: str, name: str, gemm: dict, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype,
                  random: RandomSource, capture: Optional[StepCapture], misfit: str = "pad") -> torch.Tensor:
    """a·bᵀ with both operands (2-D, reduction dim last) quantized per `gemm` (a padded rotation pads
    both), multiplied in `dtype`. Random bits are keyed to the operands (draws.py), so a checkpoint's
    recompute of the forward pass gives the forward pass's bits."""
    with_stats = capture is not None and capture.with_stats
    aq, bq, sums = gemm_operands(gemm, a, b, name == "dgrad", random, f"{layer} {name}", dtype, with_stats, misfit=misfit, b_is_weight=True)
    if capture is not None:
        capture.observe_operands(layer, name, gemm, a, b, sums)
    return aq @ bq.t()


class _EmulatedLinearFunction(torch.autograd.Function):
    """Runs only the GEMMs autograd asks for: a frozen weight has no Wgrad (and keeps no X), an
    input that needs no gradient no Dgrad (and keeps no W), as in the trainer's own backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer: str, emulation: Emulation):
        dtype = compute_dtype(x)
        capture = emulation.capture
        if capture is not None and not capture.observes(layer):  # a layer the bridge leaves out
            capture = None
        if capture is not None and ctx.needs_input_grad[1] and not in_backward():
            capture.forward_call(layer)
        x2 = x.reshape(-1, x.shape[-1])
        # A checkpoint's recompute (in backward) runs this forward again: its Fprop was measured once.
        fprop_capture = capture if not in_backward() else None
        y = emulated_gemm(layer, "fprop", emulation.gemms["fprop"], x2, weight, dtype, emulation.random, fprop_capture, emulation.misfit)
        if bias is not None:
            y = y + bias.to(dtype)
        needs_dx, needs_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(x if needs_dw else None, weight if needs_dx else None)
        ctx.meta = (layer, emulation, capture, dtype, tuple(x.shape), x.dtype, weight.dtype)
        # Not y.reshape: autograd refuses in-place changes to a view made inside a custom Function,
        # and models add to a projection's output in place (transformers' RoCBert, Llama 4). y is
        # this call's own fresh tensor, so its storage under another shape is safe to hand out.
        return torch.ops.aten._unsafe_view(y, (*x.shape[:-1], weight.shape[0]))

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        layer, emulation, capture, dtype, x_shape, x_dtype, w_dtype = ctx.meta
        if capture is not None:
            capture.backward_begun = True
        dy2 = dy.reshape(-1, dy.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = emulated_gemm(layer, "dgrad", emulation.gemms["dgrad"], dy2, weight.t(), dtype, emulation.random, capture, emulation.misfit)
            dx = dx.reshape(x_shape).to(x_dtype)
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1])
            dw = quantized_wgrad(layer, emulation.gemms["wgrad"], dy2.to(dtype), x2.to(dtype), emulation.random, capture, emulation.misfit).to(w_dtype)
        if ctx.needs_input_grad[2]:
            db = dy2.sum(0).to(w_dtype)
        return dx, dw, db, None, None


def _emulated_forward(self: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    if not self._mxscope_emulation.enabled:
        return type(self).forward(self, x)
    return _emulated_linear(self, x)


@eager
def _emulated_linear(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    weight = module.weight.t() if is_transposed_linear(module) else module.weight
    return _EmulatedLinearFunction.apply(x, weight, module.bias, module._mxscope_name, module._mxscope_emulation)


def emulatable(module) -> bool:
    """nn.Linear (subclasses that keep its forward), GPT-2-style Conv1D (its [in, out] weight
    enters the GEMMs transposed) and an expert of a 3-D parameter (experts.py runs its F.linear
    emulated). A subclass with a forward of its own (Phi-MoE's router returns a tuple) is observed,
    not emulated: its forward is more than the GEMM."""
    if isinstance(module, torch.nn.Linear):
        return type(module).forward is torch.nn.Linear.forward
    return isinstance(module, ExpertSlice) or is_transposed_linear(module)


#: Counts emulate() calls, so a Bridge notices layers emulated after it attached (no order trap).
GENERATION = [0]


def emulate_layer(name: str, module: torch.nn.Module, emulation: Emulation) -> None:
    """Run one linear layer's (`emulatable`) three GEMMs emulated, reading `emulation.gemms` at every call."""
    module._mxscope_name = clean_name(name)
    module._mxscope_emulation = emulation
    if not isinstance(module, ExpertSlice):
        module.forward = types.MethodType(_emulated_forward, module)
    emulation.layers[name] = module
    GENERATION[0] += 1


def emulate(model: torch.nn.Module, gemms: Optional[Dict[str, dict]] = None, seed: int = 0, skip=()) -> Emulation:
    """Patch every linear layer of `model` (`emulatable`, except names in `skip`) to run emulated; returns the shared
    Emulation whose `gemms` the layers read at every call. A Bridge on the model (created before or
    after) sets `gemms` from each run's config at start_run."""
    emulation = Emulation(gemms, seed)
    for name, module in model.named_modules():
        weights = own_weights(clean_name(name), module)
        if weights is not None:
            for slice_name, expert in weights:
                if slice_name not in skip:
                    emulate_layer(slice_name, expert, emulation)
        elif emulatable(module) and name not in skip:
            emulate_layer(name, module, emulation)
    GENERATION[0] += 1
    return emulation

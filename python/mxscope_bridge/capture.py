"""What one training step contributes to telemetry, gathered from hooks or the emulated GEMMs.

A step is either a stats step (operand stats and the Wgrad error E with the exact ∇W) or the step
just before one (only E, kept so the stats step can report lag-1 correlation). Contributions from
several micro-batches add up.
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Set, Tuple

import torch

from . import mxfp4, stats
from .precision import quantize_operand
from .rotation import DeviceGenerators, make_rotation, rotate

GEMM_OPERANDS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
GRADIENT_OPERANDS = ("dy",)


@contextlib.contextmanager
def exact_matmuls(source_dtype: torch.dtype):
    """Allow TF32 only where it is exact: operands that are bf16/fp16 values (or MXFP4 values)."""
    exact = source_dtype in (torch.bfloat16, torch.float16)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = exact
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


class StepCapture:
    def __init__(self, with_stats: bool, generators: DeviceGenerators, misfit: str = "pad", layers: Optional[Set[str]] = None):
        self.with_stats = with_stats
        #: the observed layer names (None: every layer)
        self.layers = layers
        self.generators = generators
        #: what a Hadamard block that does not divide the reduction dimension does (rotation.MISFITS)
        self.misfit = misfit
        #: (layer, gemm) -> (precision, {operand: sums})
        self.operands: Dict[Tuple[str, str], Tuple[str, Dict[str, stats.OperandSums]]] = {}
        #: (layer, gemm) whose stats simulate MXFP4 on operands of a GEMM that ran at another precision
        self.simulated: Set[Tuple[str, str]] = set()
        #: (layer, gemm, operand) -> sums of the quantized operand a trainer's own kernel produced
        self.kernel: Dict[Tuple[str, str, str], stats.OperandSums] = {}
        #: layer -> [E, ∇W] (stats step) or [E] (the step before), summed over micro-batches
        self.wgrad: Dict[str, List[torch.Tensor]] = {}

    def observes(self, layer: str) -> bool:
        return self.layers is None or layer in self.layers

    def add_operand(self, layer: str, gemm: str, precision: str, operand: str, sums: stats.OperandSums) -> None:
        _, by_operand = self.operands.setdefault((layer, gemm), (precision, {}))
        by_operand[operand] = by_operand[operand].merged(sums) if operand in by_operand else sums

    def add_wgrad(self, layer: str, err: torch.Tensor, grad: torch.Tensor) -> None:
        # Only the stats step reads ∇W: the step before keeps (and, on several ranks, reduces) E alone.
        parts = [err, grad] if self.with_stats else [err]
        if layer in self.wgrad:
            for total, part in zip(self.wgrad[layer], parts):
                total += part
        else:
            self.wgrad[layer] = parts

    def add_kernel_operand(self, layer: str, gemm: str, operand: str, sums: stats.OperandSums) -> None:
        key = (layer, gemm, operand)
        self.kernel[key] = self.kernel[key].merged(sums) if key in self.kernel else sums

    def observe_operands(self, layer: str, gemm_name: str, gemm: dict, a: Optional[torch.Tensor], b: Optional[torch.Tensor],
                         quantized: Tuple = (None, None), precision: Optional[str] = None) -> None:
        """Operand stats of one GEMM (operands with the reduction dim last; None = seen elsewhere).
        MXFP4 results the GEMM already computed are reused; otherwise MXFP4 with the GEMM's rotation
        is computed here (a random rotation then draws its own signs). `precision`: what the GEMM
        really ran at, when it is not `gemm`'s (an observed GEMM: the stats are then simulated)."""
        if not self.with_stats:
            return
        if precision is not None:
            self.simulated.add((layer, gemm_name))
        r = None
        for name, x, q in zip(GEMM_OPERANDS[gemm_name], (a, b), quantized):
            if x is None:
                continue
            if q is None:
                if r is None and gemm["rotation"] != "none":
                    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], x.shape[-1], x.device, self.generators(x.device), self.misfit)
                q = mxfp4.quantize(rotate(x, r, f"{layer} {gemm_name} {name}"), gemm["rounding"], gemm["srPrescale"], self.generators(x.device))
            self.add_operand(layer, gemm_name, precision or gemm["precision"], name, stats.operand_sums(q))


def quantized_wgrad(layer: str, gemm: dict, dy: torch.Tensor, x: torch.Tensor, generator: Optional[torch.Generator], capture: Optional[StepCapture],
                    misfit: str = "pad", precision: Optional[str] = None):
    """∇W = ∇Yᵀ·X at the GEMM's precision (dy: [tokens, out], x: [tokens, in]); records E if capturing.
    `precision`: what an observed GEMM really ran at (E is then what `gemm` would have done)."""
    a, b = dy.t(), x.t()
    r = make_rotation(gemm["rotation"], gemm["hadamardBlock"], dy.shape[0], dy.device, generator, misfit) if gemm["precision"] == "mxfp4" else None
    aq, qa = quantize_operand(a, gemm, True, r, generator, f"{layer} wgrad dy")
    bq, qb = quantize_operand(b, gemm, False, r, generator, f"{layer} wgrad x")
    if capture is None:
        return (aq.to(dy.dtype) @ bq.to(dy.dtype).t())
    with exact_matmuls(dy.dtype):
        dw = aq @ bq.t()
        exact = a.to(torch.float32) @ b.to(torch.float32).t()
    capture.add_wgrad(layer, dw - exact, exact)
    capture.observe_operands(layer, "wgrad", gemm, a, b, (qa, qb), precision)
    return dw

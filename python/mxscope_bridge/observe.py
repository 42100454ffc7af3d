"""Observing a GEMM the trainer runs itself: a forward hook reads X and W (through the module's
LinearLike adapter) and a tensor hook on Y reads ∇Y; the operand stats and the Wgrad error are what
MXFP4 with the run config's rotation and rounding would do to those operands (`simulated`), and the
records carry the precision the GEMM really ran at."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

import torch

from .capture import quantized_wgrad
from .config import GEMM_KINDS
from .layers import LinearLike
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


def ran_at(declared: Dict[str, str], gemm: str, output: torch.Tensor) -> str:
    return declared.get(gemm) or DTYPE_PRECISION.get(output.dtype, "fp32")


def observer_hook(bridge: "Bridge", name: str, adapter: LinearLike):
    """The forward hook observing layer `name` on capture steps (emulated layers report themselves)."""
    def hook(module, inputs, output):
        capture = bridge.capture
        if capture is None or not torch.is_grad_enabled() or getattr(module, "_mxscope_emulation", None) is not None:
            return
        y = adapter.output(output)
        if y is None:
            return
        x = adapter.gemm_input(module, inputs, output).detach()
        x2 = x.reshape(-1, x.shape[-1])
        weight = adapter.weight(module).detach()
        if hasattr(weight, "full_tensor"):  # a DTensor (FSDP2 outside its unshard window)
            weight = weight.full_tensor()
        gemms = {kind: dict(g, precision="mxfp4") for kind, g in bridge.config["gemms"].items()}  # what MXFP4 would do
        ran = {kind: ran_at(bridge._declared, kind, y) for kind in GEMM_KINDS}
        capture.observe_operands(name, "fprop", gemms["fprop"], x2, weight, precision=ran["fprop"])
        capture.observe_operands(name, "dgrad", gemms["dgrad"], None, weight.t(), precision=ran["dgrad"])
        if y.requires_grad:
            def on_grad(dy: torch.Tensor) -> Optional[torch.Tensor]:
                dy2 = dy.detach().reshape(-1, dy.shape[-1])
                capture.observe_operands(name, "dgrad", gemms["dgrad"], dy2, None, precision=ran["dgrad"])
                quantized_wgrad(name, gemms["wgrad"], dy2, x2.to(dy2.dtype), bridge.generators(dy2.device), capture, bridge.misfit, ran["wgrad"])
                return None
            y.register_hook(on_grad)
    return hook

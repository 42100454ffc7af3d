"""nn.MultiheadAttention's GEMMs as layers. It multiplies its weights itself, inside
F.multi_head_attention_forward: the packed `in_proj_weight` (or `q_proj_weight`, `k_proj_weight` and
`v_proj_weight` when the three differ in size) is a parameter, not a module, and its `out_proj` is a
Linear whose forward never runs, so no module hook sees those GEMMs.

The in-projection weights become layers of their own (`<attention>.in_proj`, or `.q_proj`, `.k_proj`,
`.v_proj`); `out_proj` stays the Linear it is. While one of them is hooked or emulated, the
attention's forward runs with torch.nn.functional's `linear` replaced by one that hands a product by
one of those weights to that layer's hooks or emulated GEMM. A module-global replacement, because
F.multi_head_attention_forward is itself dispatched through torch functions, which a torch-function
mode's handler runs with the mode off; it lasts for that forward only, and any other product passes
through unchanged. Cross-attention splits the packed weight into views, which are not matched: its
in-projection gets no stats (the bridge's log names it)."""
from __future__ import annotations

import types
from typing import List, Tuple

import torch

from .compile_stance import eager
from .experts import ExpertSlice, busy, run_linear


def is_attention(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.nn.MultiheadAttention)


def attention_weights(name: str, module: torch.nn.MultiheadAttention) -> List[Tuple[str, ExpertSlice]]:
    """(`<name>.in_proj` or `<name>.q_proj`/`.k_proj`/`.v_proj`, its layer), the module made ready to
    run their hooks and emulation (once)."""
    targets = getattr(module, "_mxscope_attention", None)
    if targets is None:
        if module.in_proj_weight is not None:
            own = [("in_proj", module.in_proj_weight)]
        else:
            own = [(label, getattr(module, f"{label}_weight")) for label in ("q_proj", "k_proj", "v_proj")]
        targets = [(label, ExpertSlice(module, param, None)) for label, param in own]
        module._mxscope_attention = targets
        module.forward = types.MethodType(_watched_forward, module)
    return [(f"{name}.{label}", target) for label, target in targets]


def _watched_forward(self: torch.nn.MultiheadAttention, *args, **kwargs):
    targets = [target for _, target in self._mxscope_attention] + [self.out_proj]
    if not any(busy(target) for target in targets):
        return type(self).forward(self, *args, **kwargs)
    return _gemm_by_gemm(self, targets, args, kwargs)


@eager
def _gemm_by_gemm(module: torch.nn.MultiheadAttention, targets: list, args, kwargs):
    functional = torch.nn.functional
    original = functional.linear
    by_weight = {id(target.weight): target for target in targets}

    def linear(x, weight, bias=None):
        target = by_weight.get(id(weight))
        if target is None:
            return original(x, weight, bias)
        return run_linear(target, x, weight, bias, original)

    functional.linear = linear
    try:
        return type(module).forward(module, *args, **kwargs)
    finally:
        functional.linear = original

"""Mixture-of-experts blocks that keep their experts as 3-D parameters (transformers' MoE models
since v5: `gate_up_proj` [E, 2I, H] and `down_proj` [E, H, I] of a `…Experts` module, each expert's
GEMM an `F.linear(x, param[e])`) seen as one linear layer per expert and parameter.

Some keep each expert's weight as [in, out] and multiply with `@`, `torch.matmul` or one `torch.bmm`
over all experts (transformers' GPT-OSS, Llama 4, Aria): those parameters are "transposed", and an
expert's GEMM weight [out, in] is `param[e].t()`. The layout comes from the module's `is_transposed`
(transformers' use_experts_implementation sets it), else from its `in_features`/`out_features`, else
from which side of the parameter holds its `hidden_size`.

No module holds an expert's weight, so no module hook can see its GEMM. While a hooked or emulated
expert's block runs its forward, a torch-function mode watches `F.linear` and the matmul family: a
product by expert e of a registered parameter runs that expert's hooks around it (the observing
hooks of observe.py, which take the slice as their module) or, emulated, runs as the emulated GEMM;
a `bmm` by a whole registered parameter runs as one such product per expert, and so does a
grouped GEMM by one (`F.grouped_mm` or `torch._grouped_mm`: transformers' grouped_mm implementation
on CUDA, the routed tokens sorted by expert, split at the offsets it is given). Experts that an
implementation multiplies another way (transformers' batched_mm, grouped_mm without a grouped GEMM
in torch or off CUDA) run their eager implementation instead while hooked (a capturing step) or
emulated: the same products, one GEMM per expert. Emulated experts of a grouped GEMM, or of one bmm
over all of them, run as one grouped emulated product (grouped_emulation.py), but for the experts a
capture step measures, which get GEMMs of their own. Observed experts of a grouped GEMM are measured
as a group from the unsplit call where that gives the same telemetry (grouped_observe.py)."""
from __future__ import annotations

import types
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from .compile_stance import eager


class _Handle:
    def __init__(self, hooks: list, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self) -> None:
        if self.fn in self.hooks:
            self.hooks.remove(self.fn)


class ExpertSlice:
    """Expert `index` of the 3-D parameter `param` of module `owner`: weight [out, in] = param[index],
    or param[index].t() where the parameter is `transposed` ([E, in, out]) (index None: a 2-D
    parameter its owner multiplies itself, attention.py). It takes forward hooks and pre-hooks as a
    module does; its owner's watched forward calls them."""

    def __init__(self, owner: torch.nn.Module, param: torch.nn.Parameter, index: Optional[int], transposed: bool = False):
        self.owner, self.param, self.index, self.transposed = owner, param, index, transposed
        self.forward_hooks: List[Callable] = []
        self.pre_hooks: List[Callable] = []

    @property
    def weight(self) -> torch.Tensor:
        weight = self.param if self.index is None else self.param[self.index]
        return weight.t() if self.transposed else weight

    def register_forward_hook(self, fn) -> _Handle:
        self.forward_hooks.append(fn)
        return _Handle(self.forward_hooks, fn)

    def register_forward_pre_hook(self, fn) -> _Handle:
        self.pre_hooks.append(fn)
        return _Handle(self.pre_hooks, fn)


def is_experts_module(module: torch.nn.Module) -> bool:
    return "Experts" in type(module).__name__ and any(p.dim() == 3 for p in module.parameters(recurse=False))


def expert_slices(name: str, module: torch.nn.Module) -> List[Tuple[str, ExpertSlice]]:
    """(`<name>.<parameter>.<e>`, slice) for each expert of each 3-D parameter of an experts module,
    which is made ready to run their hooks and emulation (once)."""
    by_param = getattr(module, "_mxscope_experts", None)
    if by_param is None:
        by_param = {}
        for param_name, param in module.named_parameters(recurse=False):
            if param.dim() == 3:
                transposed = is_transposed(module, param_name, param)
                by_param[param_name] = [ExpertSlice(module, param, e, transposed) for e in range(param.shape[0])]
        module._mxscope_experts = by_param
        module.forward = types.MethodType(_watched_forward, module)
    return [(f"{name}.{param_name}.{e}", s) for param_name, slices in by_param.items() for e, s in enumerate(slices)]


def is_transposed(module: torch.nn.Module, param_name: str, param: torch.nn.Parameter) -> bool:
    """Whether an experts parameter keeps each expert's weight as [in, out] (multiplied as x @ W[e])
    rather than [out, in] (F.linear(x, W[e])): the module's `is_transposed` where it has one, else
    its `in_features`/`out_features`, else where its `hidden_size` lies (a down projection's output
    is the hidden state, every other projection's input); [out, in] when none of them tells."""
    flag = getattr(module, "is_transposed", None)
    if isinstance(flag, bool):
        return flag
    rows, cols = param.shape[1], param.shape[2]
    features = getattr(module, "in_features", None), getattr(module, "out_features", None)
    if all(isinstance(f, int) for f in features) and features[0] != features[1]:
        if (rows, cols) == features:
            return True
        if (cols, rows) == features:
            return False
    hidden = getattr(module, "hidden_size", None)
    if isinstance(hidden, int) and rows != cols and hidden in (rows, cols):
        output_is_hidden = "down" in param_name
        return (cols == hidden) if output_is_hidden else (rows == hidden)
    return False


def _watched_forward(self: torch.nn.Module, *args, **kwargs):
    slices = [s for group in self._mxscope_experts.values() for s in group]
    if not any(busy(s) for s in slices):
        return type(self).forward(self, *args, **kwargs)
    return _expert_by_expert(self, slices, args, kwargs)


@eager
def _expert_by_expert(module: torch.nn.Module, slices: List[ExpertSlice], args, kwargs):
    grouped = _keeps_grouped_mm(module)
    calls = _ExpertCalls(slices)
    with calls:
        out = (type(module).forward if grouped else _eager_forward(module))(module, *args, **kwargs)
    if grouped and not calls.split:
        # Its grouped products were not torch's grouped GEMM by its parameters: this step's experts
        # went unseen. From the next call on, the eager loop runs instead.
        module._mxscope_grouped_unsplit = True
        warnings.warn(f"mxscope: the experts of {type(module).__name__} multiplied without a grouped GEMM by their parameters that "
                      "the bridge could split; they run their eager implementation from now on while observed or emulated")
    return out


#: torch's grouped GEMMs: transformers' grouped_mm experts multiply with one of them (F.grouped_mm
#: from torch 2.10, torch._grouped_mm from 2.9); either may call the other.
_GROUPED_MMS = tuple(f for f in (getattr(torch.nn.functional, "grouped_mm", None), getattr(torch, "_grouped_mm", None)) if f is not None)


def _keeps_grouped_mm(module: torch.nn.Module) -> bool:
    """Whether transformers' experts `module` keeps its grouped_mm implementation while hooked or
    emulated: on CUDA, where torch has a grouped GEMM, _ExpertCalls splits its products by expert
    (one sync for the offsets, where the eager loop syncs at every expert)."""
    implementation = getattr(getattr(module, "config", None), "_experts_implementation", None)
    return (implementation == "grouped_mm" and bool(_GROUPED_MMS) and not getattr(module, "_mxscope_grouped_unsplit", False)
            and all(group[0].param.is_cuda for group in module._mxscope_experts.values()))


def _eager_forward(module: torch.nn.Module):
    """The forward that multiplies expert by expert: transformers' experts pick an implementation
    (`config._experts_implementation`: grouped_mm, batched_mm, …) at every call and keep the eager
    one, which does, as the forward their dispatcher wraps."""
    forward = type(module).forward
    implementation = getattr(getattr(module, "config", None), "_experts_implementation", None)
    if implementation not in (None, "eager") and hasattr(forward, "__wrapped__"):
        return forward.__wrapped__
    return forward


#: Products a watched forward may multiply an expert's weight by, as (input, weight [in, out]).
_MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm)


def _matmul_linear(x: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
    """x @ weight.t() (+ bias): an expert's product by its [out, in] weight, the way `@` multiplies it."""
    y = torch.matmul(x, weight.t())
    return y if bias is None else y + bias


class _ExpertCalls(TorchFunctionMode):
    def __init__(self, slices: List[ExpertSlice]):
        super().__init__()
        #: (parameter id, storage offset of the expert) -> its slice
        self.slices: Dict[Tuple[int, int], ExpertSlice] = {(id(s.param), s.param.storage_offset() + s.index * s.param.stride(0)): s for s in slices}
        self.params = {id(s.param): s.param for s in slices}
        #: grouped GEMMs split by expert
        self.split = 0

    def _slice(self, weight) -> Optional[ExpertSlice]:
        """The expert whose GEMM weight [out, in] `weight` is (the same view of its parameter), if any."""
        base = getattr(weight, "_base", None) if isinstance(weight, torch.Tensor) else None
        if base is None or id(base) not in self.params:
            return None
        found = self.slices.get((id(base), weight.storage_offset()))
        if found is None:
            return None
        own = found.weight
        if weight.shape != own.shape or weight.stride() != own.stride():
            return None
        return found

    def _param(self, weights) -> Optional[torch.nn.Parameter]:
        """The registered parameter that 3-D `weights` [E, in, out] holds all experts of (itself or a view), if any."""
        if not isinstance(weights, torch.Tensor) or weights.dim() != 3:
            return None
        param = self.params.get(id(weights))
        if param is None:
            param = self.params.get(id(getattr(weights, "_base", None)))
        if param is None or weights.shape[0] != param.shape[0]:
            return None
        return param

    def _grouped(self, call, args, kwargs) -> Optional[torch.Tensor]:
        """A grouped GEMM `call` (x [rows, in], weights [E, in, out], offs = the end of each expert's
        rows) by a registered parameter (or its transpose) with each busy expert's rows its own
        product (run_linear), the others' rows the grouped GEMM's; rows past the last end
        (transformers' expert-parallel sentinels, which the kernel skips) as the kernel leaves them,
        or zeros where every expert is busy. None for any other grouped product (run as it is)."""
        names = ("offs", "bias", "out_dtype")
        given = dict(zip(names, args[2:]), **kwargs)
        if len(args) < 2 or not set(given) <= set(names) or given.get("offs") is None or given.get("bias") is not None or given.get("out_dtype") is not None:
            return None
        x, weights = args[:2]
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or self._param(weights) is None:
            return None
        experts = [self._slice(weights[e].t()) for e in range(weights.shape[0])]
        ends = given["offs"].tolist()
        if any(found is None for found in experts) or len(ends) != len(experts) or not 0 < ends[-1] <= x.shape[0]:
            return None
        self.split += 1
        # Experts with nothing of their own to do this step keep one grouped product: the trainer's
        # grouped GEMM, or emulated, one grouped emulated product (outside this stats step's layer
        # group, or on a step without a capture). Its rows of the other experts are replaced (no
        # gradient flows back through them) by their own products, through their hooks.
        emulation = _grouped_emulation(experts)
        if emulation is None:
            from .grouped_observe import observe_grouped
            observed = observe_grouped(experts, x, weights, ends, call, args, kwargs)
            if observed is not None:
                return observed
        own = [_measured(found) for found in experts] if emulation is not None else [busy(found) for found in experts]
        if all(own):
            grouped = None
        elif emulation is not None:
            from .grouped_emulation import GroupedEmulatedExperts
            grouped = GroupedEmulatedExperts.apply(x, weights, given["offs"], ends, emulation, call, experts[0]._mxscope_name.rsplit(".", 1)[0])
            if not any(own):
                return grouped
        else:
            grouped = call(*args, **kwargs)
        parts, start, kept = [], 0, 0  # kept: rows before `kept` not yet taken from `grouped`
        for e, end in enumerate(ends):
            if end > start and (grouped is None or own[e]):  # an expert no token reached has no GEMM, as in the eager loop
                if kept < start:
                    parts.append(grouped[kept:start])
                parts.append(run_linear(experts[e], x[start:end], weights[e].t(), None, _matmul_linear))
                kept = end
            start = end
        if grouped is not None:
            parts.append(grouped[kept:])
        elif start < x.shape[0]:  # rows past the last expert's (expert-parallel sentinels): the kernel leaves them unwritten
            parts.append(parts[-1].new_zeros(x.shape[0] - start, parts[-1].shape[1]))
        return torch.cat(parts)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _GROUPED_MMS:
            products = self._grouped(func, args, kwargs)
            return func(*args, **kwargs) if products is None else products
        if func is torch.nn.functional.linear:
            x = args[0] if args else kwargs.get("input")
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            found = self._slice(weight)
            return func(*args, **kwargs) if found is None else run_linear(found, x, weight, bias, func)
        if func in _MATMULS and len(args) == 2 and not kwargs:
            x, weights = args
            if isinstance(weights, torch.Tensor) and weights.dim() == 2:
                found = self._slice(weights.t())
                if found is not None:
                    return run_linear(found, x, weights.t(), None, _matmul_linear)
            elif self._param(weights) is not None and isinstance(x, torch.Tensor) and x.dim() == 3:
                experts = [self._slice(weights[e].t()) for e in range(weights.shape[0])]
                if all(found is not None for found in experts):
                    batched = _batched_emulated(x, weights, experts)
                    if batched is not None:
                        return batched
                    return torch.stack([run_linear(found, x[e], weights[e].t(), None, _matmul_linear) for e, found in enumerate(experts)])
        return func(*args, **kwargs)


def _grouped_emulation(experts: List[ExpertSlice]):
    """The Emulation that every expert of a grouped GEMM runs under, when the experts this step does
    not measure can run as one grouped emulated product (grouped_emulation.py): every GEMM's config
    quantizes all experts' operands at once."""
    emulation = getattr(experts[0], "_mxscope_emulation", None)
    if emulation is None or not emulation.enabled or not all(getattr(e, "_mxscope_emulation", None) is emulation for e in experts):
        return None
    from .grouped_emulation import groupable
    return emulation if all(groupable(emulation.gemms[kind], emulation.misfit) for kind in ("fprop", "dgrad", "wgrad")) else None


def _batched_emulated(x: torch.Tensor, weights: torch.Tensor, experts: List[ExpertSlice]) -> Optional[torch.Tensor]:
    """A bmm by all experts (x [E, tokens, in], weights [E, in, out]; Llama 4) as one grouped
    emulated product of equal groups, where all experts run emulated and none is measured this step;
    else None (one product per expert)."""
    emulation = _grouped_emulation(experts)
    if emulation is None or any(_measured(found) for found in experts):
        return None
    from .grouped_emulation import GroupedEmulatedExperts, equal_groups_mm
    count, tokens = x.shape[0], x.shape[1]
    ends = [tokens * (e + 1) for e in range(count)]
    offs = torch.tensor(ends, dtype=torch.int32, device=x.device)
    y = GroupedEmulatedExperts.apply(x.reshape(count * tokens, x.shape[2]), weights, offs, ends, emulation, equal_groups_mm,
                                     experts[0]._mxscope_name.rsplit(".", 1)[0])
    return y.view(count, tokens, weights.shape[2])


def _measured(expert: ExpertSlice) -> bool:
    """Whether an emulated expert has hooks or a capture measures it this step: its GEMMs then run
    on their own, reporting themselves."""
    capture = expert._mxscope_emulation.capture
    return bool(expert.pre_hooks or expert.forward_hooks) or (capture is not None and capture.observes(expert._mxscope_name))


def _hooks(target) -> Tuple[list, list]:
    if isinstance(target, torch.nn.Module):
        return list(target._forward_pre_hooks.values()), list(target._forward_hooks.values())
    return list(target.pre_hooks), list(target.forward_hooks)


def busy(target) -> bool:
    """Whether a watched GEMM's target (an ExpertSlice or a module) has hooks or is emulated now (an
    emulation switched off leaves the trainer's implementation to run)."""
    pre, forward = _hooks(target)
    emulation = getattr(target, "_mxscope_emulation", None)
    return bool(pre or forward) or (emulation is not None and emulation.enabled)


def run_linear(target, x: torch.Tensor, weight: torch.Tensor, bias, linear: Callable) -> torch.Tensor:
    """`linear(x, weight, bias)` as the GEMM of `target`: its pre-hooks, the product (emulated when
    the target is), its forward hooks, as a module's call would run them."""
    pre, forward = _hooks(target)
    for hook in pre:
        hook(target, (x,))
    emulation = getattr(target, "_mxscope_emulation", None)
    if emulation is not None and emulation.enabled:
        from .emulate import _EmulatedLinearFunction
        y = _EmulatedLinearFunction.apply(x, weight, bias, target._mxscope_name, emulation)
    else:
        y = linear(x, weight, bias)
    for hook in forward:
        hook(target, (x,), y)
    return y

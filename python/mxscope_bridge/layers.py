"""Which modules the bridge observes, how it reads their GEMM, and how they are described (LayerInfo)."""
from __future__ import annotations

import fnmatch
import random
import re
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import torch

from .attention import attention_weights, is_attention
from .experts import expert_slices, is_experts_module
from .rotation import fit

# Wrapper components that DDP, FSDP, activation checkpointing and torch.compile add to names.
WRAPPERS = {"module", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"}
KINDS = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
         "down_proj": "down", "lm_head": "lm_head", "wq": "q", "wk": "k", "wv": "v", "wo": "o", "w1": "gate", "w3": "up", "w2": "down"}


def clean_name(raw: str) -> str:
    return ".".join(part for part in raw.split(".") if part not in WRAPPERS) or raw


def layer_kind(name: str) -> str:
    parts = name.split(".")
    last = parts[-2] if parts[-1].isdigit() and len(parts) > 1 else parts[-1]  # an expert: <experts>.<parameter>.<e>
    return KINDS.get(last, last)


def layer_block(name: str) -> int:
    match = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
    return int(match.group(1)) if match else -1


def sampled_rows(out_features: int, row_stride: int) -> int:
    """Rows 0, row_stride, 2·row_stride, … of an [out_features, in] ∇W: those the Wgrad error is made of."""
    return -(-out_features // row_stride)


def sketch_indices(name: str, out_features: int, in_features: int, count: int, seed: int, row_stride: int = 1) -> List[int]:
    """Fixed sample positions into the flattened weight (the same on every rank and every step), in the
    rows the Wgrad error is made of (every row_stride-th; with 1, every row)."""
    size = sampled_rows(out_features, row_stride) * in_features
    picked = sorted(random.Random(f"{seed}:{name}").sample(range(size), min(count, size)))
    if row_stride == 1:
        return picked
    return [(i // in_features) * row_stride * in_features + i % in_features for i in picked]


class LinearLike:
    """How the bridge reads a linear-like module whose GEMM is Y = X·Wᵀ but whose weight or GEMM
    input is not `module.weight` / `inputs[0]` (a fused norm + linear, a module holding its weight
    elsewhere). Each callable gets the module (and the forward hook's inputs and output):

    - `weight(module)`: the [out, in] weight the GEMM uses (default `module.weight`);
    - `gemm_input(module, inputs, output)`: the tensor that enters the GEMM, [..., in] (default
      `inputs[0]`; for a fused LayerNorm + Linear, the normalized input);
    - `output(output)`: the GEMM's output Y, whose gradient is ∇Y (default: the output, or the first
      element of a tuple such as Megatron's (output, bias)).
    """

    def __init__(self, weight: Optional[Callable] = None, gemm_input: Optional[Callable] = None, output: Optional[Callable] = None):
        self.weight = weight or (lambda module: module.weight)
        self.gemm_input = gemm_input or (lambda module, inputs, output: inputs[0])
        self.output = output or first_tensor


def first_tensor(output):
    """A module's output tensor: itself, or the first element of a tuple/list (output, bias, ...)."""
    if isinstance(output, (tuple, list)) and output:
        output = output[0]
    return output if isinstance(output, torch.Tensor) else None


DEFAULT_ADAPTER = LinearLike()
#: A linear layer whose weight is stored [in, out]: its [out, in] weight is the transpose.
TRANSPOSED_LINEAR = LinearLike(weight=lambda module: module.weight.t())


def is_transposed_linear(module: torch.nn.Module) -> bool:
    """GPT-2's Conv1D (transformers' pytorch_utils.Conv1D, and the copies other code keeps):
    Y = X·W + b with W [in, out] and `nf` output features; a linear layer by another name."""
    weight = getattr(module, "weight", None)
    return (type(module).__name__ == "Conv1D" and isinstance(weight, torch.Tensor) and weight.dim() == 2
            and getattr(module, "nf", None) == weight.shape[1])


def default_adapter(module: torch.nn.Module) -> LinearLike:
    return TRANSPOSED_LINEAR if is_transposed_linear(module) else DEFAULT_ADAPTER


def _matches(patterns: Iterable[str], *names: str) -> List[str]:
    return [p for p in patterns if any(fnmatch.fnmatchcase(n, p) for n in names)]


def observed_modules(model: torch.nn.Module, include: Optional[Iterable[str]] = None, exclude: Iterable[str] = (),
                     adapters: Optional[Dict[str, LinearLike]] = None, extra: Iterable[str] = ()) -> List[Tuple[str, torch.nn.Module, LinearLike]]:
    """The (name, module, adapter) triples the bridge observes.

    Default: every nn.Linear (subclasses too), GPT-2-style Conv1D and each expert of an experts
    module's 3-D parameters (experts.py), plus `extra` (names or globs). `include` (names or globs, matched against the name
    with and without DDP/FSDP/compile wrapper parts): only these, which may be any module with a
    2-D weight [out, in] applied as X·Wᵀ; `exclude`: never these; `adapters` ({name or glob:
    LinearLike}): these are observed through their adapter, and nn.Linear modules inside them are
    not observed again. A pattern that matches no module is an error naming it."""
    include = None if include is None else list(include)
    exclude, adapters, extra = list(exclude), dict(adapters or {}), list(extra)
    used = set()
    found, adapted_prefixes = [], []
    for raw, module in model.named_modules():
        name = clean_name(raw)
        adapter_keys = _matches(adapters, name, raw)
        chosen = _matches(include, name, raw) if include is not None else []
        excluded = _matches(exclude, name, raw)
        also = _matches(extra, name, raw)
        used.update(adapter_keys, chosen, excluded, also)
        inside_adapted = any(raw.startswith(prefix) for prefix in adapted_prefixes)
        weights = own_weights(name, module) if not adapter_keys and not excluded and not inside_adapted else None
        if weights is not None:  # an attention's out_proj is found as the Linear it is
            found += _chosen_weights(weights, include if include is not None and not chosen else None, exclude, used)
            continue
        wanted = bool(adapter_keys) or (chosen if include is not None else
                                        isinstance(module, torch.nn.Linear) or is_transposed_linear(module) or also)
        if not wanted or excluded or inside_adapted:
            continue
        adapter = adapters[adapter_keys[0]] if adapter_keys else default_adapter(module)
        if adapter_keys:
            adapted_prefixes.append(raw + ".")
        weight = adapter.weight(module) if adapter is not DEFAULT_ADAPTER else getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise ValueError(f"module {name!r} ({type(module).__name__}) was chosen for observation but has no 2-D weight [out, in]: "
                             "give it a LinearLike adapter (adapters={name: LinearLike(weight=...)}) or leave it out")
        found.append((name, module, adapter))
    unused = [p for p in (include or []) + exclude + list(adapters) + extra if p not in used]
    if unused:
        names = [clean_name(raw) for raw, _ in model.named_modules() if raw][:8]
        raise ValueError(f"module patterns {unused} match no module of the model; names look like {names}")
    return found


def own_weights(name: str, module: torch.nn.Module) -> Optional[list]:
    """(name, layer) of each weight a module multiplies itself (a MoE block's experts,
    nn.MultiheadAttention's in-projection), the module made ready to run their hooks and
    emulation; None for any other module."""
    if is_experts_module(module):
        return expert_slices(name, module)
    if is_attention(module):
        return attention_weights(name, module)
    return None


def _chosen_weights(weights, include: Optional[List[str]], exclude: List[str], used: set) -> list:
    """Weights a module multiplies itself (experts, attention.py's in-projection) as layers: all of
    them, or (`include`) those whose names match; never those `exclude` matches. Patterns that
    match a weight's name count as used."""
    chosen = []
    for slice_name, expert in weights:
        excluded = _matches(exclude, slice_name)
        included = _matches(include, slice_name) if include is not None else None
        used.update(excluded, included or [])
        if not excluded and (include is None or included):
            chosen.append((slice_name, expert, DEFAULT_ADAPTER))
    return chosen


def layer_info(name: str, module: torch.nn.Module, sketch_size: int, seed: int, adapter: LinearLike = DEFAULT_ADAPTER, row_stride: int = 1) -> dict:
    out_features, in_features = adapter.weight(module).shape
    return {"name": name, "kind": layer_kind(name), "block": layer_block(name), "outFeatures": int(out_features),
            "inFeatures": int(in_features), "sketchIndices": sketch_indices(name, int(out_features), int(in_features), sketch_size, seed, row_stride)}


def rotation_fits(layers: List[dict], gemms: Dict[str, dict], misfit: str) -> List[dict]:
    """Each layer's `rotationFit` for `gemms` (see rotation.fit): Fprop reduces over inFeatures,
    Dgrad over outFeatures, Wgrad over the tokens of a micro-batch (padded or skipped per step).
    Raises ValueError naming the layer, GEMM and dimension for a configuration no layer can honour:
    any misfit under "error", or a rotated GEMM that every layer would skip."""
    dims = {"fprop": "inFeatures", "dgrad": "outFeatures", "wgrad": None}
    fits = []
    for info in layers:
        per_gemm = {}
        for gemm, dim in dims.items():
            config = gemms[gemm]
            length = info[dim] if dim else None
            try:
                per_gemm[gemm] = fit(config["rotation"], config["hadamardBlock"], length, misfit)
            except ValueError as error:
                raise ValueError(f"layer {info['name']!r} {gemm}: {dim} {error}; pass hadamard_misfit='pad' to zero-pad it, "
                                 f"choose a Hadamard block that divides it, or leave the layer out (exclude=)") from None
        fits.append(per_gemm)
    for gemm, dim in dims.items():
        statuses = [f[gemm]["status"] for f in fits]
        if fits and dim and all(s == "skipped" for s in statuses):
            raise ValueError(f"no layer can honour {gemm} rotation {gemms[gemm]['rotation']} with Hadamard block {gemms[gemm]['hadamardBlock']}: "
                             f"it divides no layer's {dim} (e.g. {fits and layers[0]['name']!r}: {layers[0][dim]}); choose a smaller block or hadamard_misfit='pad'")
    return fits

"""Which modules the bridge observes and how they are described (LayerInfo)."""
from __future__ import annotations

import random
import re
from typing import Iterable, List, Tuple

import torch

# Wrapper components that DDP, FSDP, activation checkpointing and torch.compile add to names.
WRAPPERS = {"module", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"}
KINDS = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up",
         "down_proj": "down", "lm_head": "lm_head", "wq": "q", "wk": "k", "wv": "v", "wo": "o", "w1": "gate", "w3": "up", "w2": "down"}


def clean_name(raw: str) -> str:
    return ".".join(part for part in raw.split(".") if part not in WRAPPERS) or raw


def layer_kind(name: str) -> str:
    last = name.rsplit(".", 1)[-1]
    return KINDS.get(last, last)


def layer_block(name: str) -> int:
    match = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
    return int(match.group(1)) if match else -1


def sketch_indices(name: str, size: int, count: int, seed: int) -> List[int]:
    """Fixed sample positions into the flattened weight (the same on every rank and every step)."""
    return sorted(random.Random(f"{seed}:{name}").sample(range(size), min(count, size)))


def observed_modules(model: torch.nn.Module, extra: Iterable[str] = ()) -> List[Tuple[str, torch.nn.Module]]:
    """Every nn.Linear plus the modules named in `extra` (each with a 2-D weight [out, in] applied as x·Wᵀ)."""
    extra = set(extra)
    found = []
    for raw, module in model.named_modules():
        name = clean_name(raw)
        if isinstance(module, torch.nn.Linear) or name in extra or raw in extra:
            found.append((name, module))
            extra.discard(name)
            extra.discard(raw)
    if extra:
        raise ValueError(f"modules {sorted(extra)} named for observation are not in the model")
    return found


def layer_info(name: str, module: torch.nn.Module, sketch_size: int, seed: int) -> dict:
    out_features, in_features = getattr(module, "out_features", None), getattr(module, "in_features", None)
    if out_features is None or in_features is None:
        out_features, in_features = module.weight.shape
    return {"name": name, "kind": layer_kind(name), "block": layer_block(name), "outFeatures": int(out_features),
            "inFeatures": int(in_features), "sketchIndices": sketch_indices(name, out_features * in_features, sketch_size, seed)}

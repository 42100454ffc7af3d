"""RunConfig / GemmConfig / NextRunConfig as plain dicts, mirroring src/protocol/config.ts."""
from __future__ import annotations

import copy
from typing import Any, Dict

from .precision import PRECISIONS
from .rotation import HADAMARD_BLOCKS, ROTATIONS

from .protocol import GEMM_KINDS, ROUNDINGS

FP32_GEMM = {"precision": "fp32", "rotation": "none", "hadamardBlock": 16, "rounding": "nearest-even", "srPrescale": False}


def gemm_config(precision: str = "mxfp4", rotation: str = "none", hadamard_block: int = 16, rounding: str = "nearest-even", sr_prescale: bool = False) -> dict:
    gemm = {"precision": precision, "rotation": rotation, "hadamardBlock": hadamard_block, "rounding": rounding, "srPrescale": sr_prescale}
    check_gemm(gemm, "gemm_config")
    return gemm


def default_gemms(gemm: dict = FP32_GEMM) -> Dict[str, dict]:
    return {kind: dict(gemm) for kind in GEMM_KINDS}


def run_config(preset: str = "external", *, seed: int = 0, steps: int = 0, tokens_per_step: int = 0, stats_every: int = 10,
               sketch_size: int = 64, eval_every: int = 0, data: str = "", gemms: Dict[str, dict] = None,
               model: Dict[str, Any] = None, optimizer: Dict[str, Any] = None) -> dict:
    """A RunConfig; `model` and `optimizer` are free-form maps of numbers, strings and booleans."""
    return {
        "preset": preset, "seed": seed, "steps": steps, "tokensPerStep": tokens_per_step, "statsEvery": stats_every,
        "sketchSize": sketch_size, "evalEvery": eval_every, "data": data, "gemms": copy.deepcopy(gemms or default_gemms()),
        "model": dict(model or {}), "optimizer": dict(optimizer or {}),
    }


class ConfigError(ValueError):
    """A next-run config change that protocol v1 does not allow; the message names the field."""


def _check_choice(value, choices, path):
    if isinstance(value, bool) and not any(isinstance(c, bool) for c in choices) or value not in choices:
        raise ConfigError(f"{path}: expected one of {', '.join(map(str, choices))}, got {value!r}")


def _check_int(value, low, high, path):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{path}: expected an integer in [{low}, {high}], got {value!r}")


def _check_preset(value, path):
    if not isinstance(value, str) or len(value) > 128:
        raise ConfigError(f"{path}: expected a string of at most 128 characters, got {value!r}")


GEMM_FIELDS = {
    "precision": lambda v, p: _check_choice(v, PRECISIONS, p),
    "rotation": lambda v, p: _check_choice(v, ROTATIONS, p),
    "hadamardBlock": lambda v, p: _check_choice(v, HADAMARD_BLOCKS, p),
    "rounding": lambda v, p: _check_choice(v, ROUNDINGS, p),
    "srPrescale": lambda v, p: _check_choice(v, (True, False), p),
}


def _check_fields(value, fields, path, what):
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected {what}, got {value!r}")
    for key, item in value.items():
        if key not in fields:
            raise ConfigError(f"{path}.{key}: no such field: {what} has {', '.join(fields)}")
        fields[key](item, f"{path}.{key}")


def check_gemm(gemm: dict, path: str) -> None:
    _check_fields(gemm, GEMM_FIELDS, path, "a GEMM config")
    missing = [key for key in GEMM_FIELDS if key not in gemm]
    if missing:
        raise ConfigError(f"{path}: missing {', '.join(missing)}")


def check_next_run_config(change: Any, path: str = "change") -> dict:
    """Validate a NextRunConfig exactly as nextRunConfigSchema does."""
    partial_gemm = lambda v, p: _check_fields(v, GEMM_FIELDS, p, "a GEMM config")  # noqa: E731
    _check_fields(change, {
        "gemms": lambda v, p: _check_fields(v, {kind: partial_gemm for kind in GEMM_KINDS}, p, "a map of fprop/dgrad/wgrad"),
        "seed": lambda v, p: _check_int(v, 0, 2**53 - 1, p),
        "steps": lambda v, p: _check_int(v, 1, 100_000_000, p),
        "statsEvery": lambda v, p: _check_int(v, 1, 1_000_000, p),
        "preset": _check_preset,
    }, path, "a next-run config")
    return change


def merge_run_config(base: dict, change: dict) -> dict:
    """mergeRunConfig: fields the change does not name keep their value."""
    merged = copy.deepcopy(base)
    for kind, patch in (change.get("gemms") or {}).items():
        merged["gemms"][kind].update(patch)
    for key in ("seed", "steps", "statsEvery", "preset"):
        if key in change:
            merged[key] = change[key]
    return merged

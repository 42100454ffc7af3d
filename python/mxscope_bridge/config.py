"""RunConfig / GemmConfig / NextRunConfig as plain dicts, mirroring src/protocol/config.ts."""
from __future__ import annotations

import copy
from typing import Any, Dict, List

from .precision import PRECISIONS
from .rotation import HADAMARD_BLOCKS, ROTATIONS

from .protocol import GEMM_KINDS, ROUNDINGS, WGRAD_ERROR_SCOPES

FP32_GEMM = {"precision": "fp32", "rotation": "none", "hadamardBlock": 16, "rounding": "nearest-even", "srPrescale": False}


def gemm_config(precision: str = "mxfp4", rotation: str = "none", hadamard_block: int = 16, rounding: str = "nearest-even", sr_prescale: bool = False) -> dict:
    gemm = {"precision": precision, "rotation": rotation, "hadamardBlock": hadamard_block, "rounding": rounding, "srPrescale": sr_prescale}
    check_gemm(gemm, "gemm_config")
    return gemm


def default_gemms(gemm: dict = FP32_GEMM) -> Dict[str, dict]:
    return {kind: dict(gemm) for kind in GEMM_KINDS}


def run_config(preset: str = "external", *, seed: int = 0, steps: int = 0, tokens_per_step: int = 0, stats_every: int = 10,
               sketch_size: int = 64, eval_every: int = 0, data: str = "", gemms: Dict[str, dict] = None,
               model: Dict[str, Any] = None, optimizer: Dict[str, Any] = None, stats_layer_groups: int = 1,
               wgrad_error_scope: str = "batch", wgrad_error_row_stride: int = 1, wgrad_error_lag1: bool = True) -> dict:
    """A RunConfig; `model` and `optimizer` are free-form maps of numbers, strings and booleans.
    `stats_layer_groups` = N > 1 (opt-in): each stats step reports one N-th of the layers in turn
    (exact stats, each layer every stats_every * N steps) for an N-th of the cost.
    `wgrad_error_scope` = "rank" (opt-in, data parallelism): each rank's own Wgrad error, averaged over
    the ranks at the step's end, instead of the error of the ranks' mean gradient
    (check_wgrad_error_scope); in one process the two are the same.
    `wgrad_error_row_stride` = N > 1 (opt-in, an estimate): the Wgrad error from every N-th row of ∇W
    (check_wgrad_error_row_stride) for about an N-th of its products.
    `wgrad_error_lag1` = False (opt-in): no lag-1 cosine (lag1Cos and sketchPrev null), so no E_{t−1}
    is kept and the step before each stats step measures nothing (check_wgrad_error_lag1)."""
    config = {
        "preset": preset, "seed": seed, "steps": steps, "tokensPerStep": tokens_per_step, "statsEvery": stats_every,
        "sketchSize": sketch_size, "evalEvery": eval_every, "data": data, "gemms": copy.deepcopy(gemms or default_gemms()),
        "model": dict(model or {}), "optimizer": dict(optimizer or {}),
    }
    if stats_layer_groups != 1:
        config["statsLayerGroups"] = stats_layer_groups
    if wgrad_error_scope != "batch":
        config["wgradErrorScope"] = wgrad_error_scope
    if wgrad_error_row_stride != 1 or isinstance(wgrad_error_row_stride, bool):  # True == 1, but is no row stride
        config["wgradErrorRowStride"] = wgrad_error_row_stride
    if wgrad_error_lag1 is not True:
        config["wgradErrorLag1"] = wgrad_error_lag1
    check_layer_groups(config)
    check_wgrad_error_scope(config)
    check_wgrad_error_row_stride(config)
    check_wgrad_error_lag1(config)
    return config


def check_wgrad_error_lag1(config: dict) -> None:
    """Refuses a wgradErrorLag1 (protocol 1.8) that is not a boolean. false is an opt-in: the bridge
    keeps no E_{t−1} (Bridge(lag1_host_bytes=0) for this run), its records' lag1Cos and sketchPrev
    are null, and the step before each stats step measures nothing."""
    lag1 = config.get("wgradErrorLag1", True)
    if not isinstance(lag1, bool):
        raise ConfigError(f"wgradErrorLag1: expected true or false (false: no lag-1 cosine), got {lag1!r}")


def check_wgrad_error_row_stride(config: dict) -> None:
    """Refuses a wgradErrorRowStride (protocol 1.5) that is not an integer from 1 to 1024. N > 1 is an
    opt-in estimate: each layer's Wgrad error comes from the rows 0, N, 2N, … of ∇W alone (its norms
    scaled to the whole tensor's rows; ratios and cosines those of the sampled rows), so the two
    Wgrad-sized products behind it cost about an N-th; the operand stats stay exact."""
    _count(config, "wgradErrorRowStride", " (1: every row of ∇W, exact)")


def check_wgrad_error_scope(config: dict) -> None:
    """Refuses a wgradErrorScope (protocol 1.4) that is not one of WGRAD_ERROR_SCOPES, naming them:
    "batch" (absent), the error of the gradient averaged over the ranks, whose E each layer's backward
    reduces across the ranks as it runs; "rank", each rank's own GEMM on its own micro-batch, no
    collective in backward, the ranks' sums and sketch entries averaged once at end_step."""
    scope = config.get("wgradErrorScope", "batch")
    if not isinstance(scope, str) or scope not in WGRAD_ERROR_SCOPES:
        raise ConfigError(f"wgradErrorScope: expected one of {', '.join(WGRAD_ERROR_SCOPES)}, got {scope!r}")


def check_layer_groups(config: dict) -> None:
    """Refuses a statsLayerGroups the bridge cannot honour, naming what to change."""
    groups = _count(config, "statsLayerGroups")
    if groups > 1 and config["statsEvery"] < 2:
        # The step before a stats step keeps E of the next group for lag-1: it cannot be a stats step itself.
        raise ConfigError(f"statsLayerGroups {groups} needs statsEvery of at least 2 (got {config['statsEvery']}): raise statsEvery or set statsLayerGroups to 1")


def _count(config: dict, key: str, meaning: str = "") -> int:
    """config[key] (absent: 1), refused unless an integer from 1 to 1024 (a bool is not one)."""
    value = config.get(key, 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise ConfigError(f"{key}: expected an integer from 1 to 1024{meaning}, got {value!r}")
    return value


class ConfigError(ValueError):
    """A GEMM config that protocol v1 does not allow; the message names the field. (Client messages
    are checked by messages.py, as src/protocol checks them.)"""


def _check_choice(value, choices, path):
    if isinstance(value, bool) and not any(isinstance(c, bool) for c in choices) or value not in choices:
        raise ConfigError(f"{path}: expected one of {', '.join(map(str, choices))}, got {value!r}")


GEMM_FIELDS = {
    "precision": lambda v, p: _check_choice(v, PRECISIONS, p),
    "rotation": lambda v, p: _check_choice(v, ROTATIONS, p),
    "hadamardBlock": lambda v, p: _check_choice(v, HADAMARD_BLOCKS, p),
    "rounding": lambda v, p: _check_choice(v, ROUNDINGS, p),
    "srPrescale": lambda v, p: _check_choice(v, (True, False), p),
    # Protocol 1.1, optional (absent = floor / 1x16 blocks): the MX scale rule and NVFP4 weight tiles.
    "scaleRule": lambda v, p: _check_choice(v, ("floor", "rceil", "even"), p),
    "nvfp4Weight2d": lambda v, p: _check_choice(v, (True, False), p),
}
OPTIONAL_GEMM_FIELDS = ("scaleRule", "nvfp4Weight2d")


def _check_fields(value, fields, path, what):
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected {what}, got {value!r}")
    for key, item in value.items():
        if key not in fields:
            raise ConfigError(f"{path}.{key}: no such field: {what} has {', '.join(fields)}")
        fields[key](item, f"{path}.{key}")


def check_gemm(gemm: dict, path: str) -> None:
    """Refuses, naming the field and what to change, a GEMM config protocol v1 does not allow or whose
    recipe cannot run (`recipe_problems`)."""
    _check_fields(gemm, GEMM_FIELDS, path, "a GEMM config")
    missing = [key for key in GEMM_FIELDS if key not in gemm and key not in OPTIONAL_GEMM_FIELDS]
    if missing:
        raise ConfigError(f"{path}: missing {', '.join(missing)}")
    problems = recipe_problems(gemm)
    if problems:
        raise ConfigError(f"{path}: {'; '.join(problems)}")


def recipe_problems(gemm: dict) -> List[str]:
    """Combinations of a GEMM's fields that cannot run, each naming what to change: those
    src/protocol/config.ts gemmRecipeProblems refuses, and the bridge's own limit (its MXFP4 under a
    scale rule other than floor rounds to nearest-even only). Reduction dimensions are not checked:
    the bridge zero-pads a partial last block."""
    precision, rule = gemm["precision"], gemm.get("scaleRule", "floor")
    problems = []
    if precision == "nvfp4" and rule != "floor":
        problems.append(f"scale rule '{rule}' is for MX formats (E8M0 scales); NVFP4's E4M3 block scales follow NVIDIA's definition — "
                        "set scaleRule to floor or precision to mxfp4/mxfp8")
    if gemm.get("nvfp4Weight2d") and precision != "nvfp4":
        problems.append(f"nvfp4Weight2d needs precision nvfp4 (it is {precision}); turn it off or set precision to nvfp4")
    if precision in ("nvfp4", "mxfp8") and gemm["rounding"] == "stochastic":
        problems.append("stochastic rounding is implemented for mxfp4 only; set rounding to nearest-even or precision to mxfp4")
    if precision in ("nvfp4", "mxfp8") and gemm["srPrescale"]:
        problems.append("srPrescale (the 3/4 prescale of stochastic rounding) is implemented for mxfp4 only; turn it off or set precision to mxfp4")
    if precision not in ("nvfp4", "mxfp8") and rule != "floor" and (gemm["rounding"] != "nearest-even" or gemm["srPrescale"]):
        problems.append(f"scale rule '{rule}' is implemented with nearest-even rounding and no prescale only in the bridge; "
                        "set scaleRule to floor, or rounding to nearest-even and srPrescale to false")
    return problems


def next_run_problems(config: dict) -> str:
    """Why a next-run config cannot run (every GEMM's problem, and a layer grouping the stats interval
    cannot honour, joined), or "" when it can."""
    problems = []
    for kind in GEMM_KINDS:
        try:
            check_gemm(config["gemms"][kind], f"gemms.{kind}")
        except ConfigError as error:
            problems.append(str(error))
    try:
        check_layer_groups(config)
    except ConfigError as error:
        problems.append(str(error))
    return "; ".join(problems)


def merge_run_config(base: dict, change: dict) -> dict:
    """mergeRunConfig: fields the change does not name keep their value (the opt-ins, protocol 1.6, too)."""
    merged = copy.deepcopy(base)
    for kind, patch in (change.get("gemms") or {}).items():
        merged["gemms"][kind].update(patch)
    for key in ("seed", "steps", "statsEvery", "statsLayerGroups", "wgradErrorRowStride", "wgradErrorLag1", "preset"):
        if key in change:
            merged[key] = change[key]
    return merged

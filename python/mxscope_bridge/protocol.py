"""The protocol's constants and GEMM labels, read from protocol.json, which `npm run protocol:python`
generates from src/protocol (TypeScript is the one source; test/protocol/python-json.test.ts fails
when the JSON is stale). Modules import what they need from here instead of copying it."""
from __future__ import annotations

import json
import os
from typing import Dict, Tuple

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.json"), encoding="utf-8") as _file:
    _PROTOCOL = json.load(_file)

PROTOCOL_VERSION: Dict[str, int] = dict(_PROTOCOL["protocolVersion"])
GEMM_KINDS: Tuple[str, ...] = tuple(_PROTOCOL["gemmKinds"])
OPERANDS: Tuple[str, ...] = tuple(_PROTOCOL["operands"])
GEMM_OPERANDS: Dict[str, Tuple[str, str]] = {gemm: tuple(pair) for gemm, pair in _PROTOCOL["gemmOperands"].items()}
PRECISIONS: Tuple[str, ...] = tuple(_PROTOCOL["precisions"])
ROTATIONS: Tuple[str, ...] = tuple(_PROTOCOL["rotations"])
HADAMARD_BLOCKS: Tuple[int, ...] = tuple(_PROTOCOL["hadamardBlocks"])
ROUNDINGS: Tuple[str, ...] = tuple(_PROTOCOL["roundings"])
WGRAD_ERROR_SCOPES: Tuple[str, ...] = tuple(_PROTOCOL["wgradErrorScopes"])
RUN_END_STATUSES: Tuple[str, ...] = tuple(_PROTOCOL["runEndStatuses"])
TELEMETRY_TYPES: Tuple[str, ...] = tuple(_PROTOCOL["telemetryTypes"])
CLIENT_MESSAGE_TYPES: Tuple[str, ...] = tuple(_PROTOCOL["clientMessageTypes"])
SERVER_MESSAGE_TYPES: Tuple[str, ...] = tuple(_PROTOCOL["serverMessageTypes"])
ERROR_CODES: Tuple[str, ...] = tuple(_PROTOCOL["errorCodes"])
LIMITS: Dict[str, int] = dict(_PROTOCOL["limits"])
_GEMM_LABELS: Dict[str, str] = _PROTOCOL["gemmLabels"]


def describe_gemm(gemm: dict) -> str:
    """describeGemm of src/protocol/config.ts: 'mxfp4 · H16', 'mxfp4 · RHT16+SR¾', 'fp8'…"""
    key = "/".join((gemm["precision"], gemm["rotation"], str(gemm["hadamardBlock"]), gemm["rounding"], "true" if gemm["srPrescale"] else "false"))
    try:
        return _GEMM_LABELS[key]
    except KeyError:
        raise ValueError(f"no label for GEMM config {gemm!r}: not a valid GemmConfig") from None

"""Protocol v1 messages, checked as src/protocol (wire.ts, telemetry.ts, config.ts) checks them:
client requests (what the bridge serves) and server messages (what it publishes; the tests hold
every record the bridge writes to these). docs/protocol.md section 8 lists the rules by id;
test/conformance/*.json are the cases on which the TypeScript and Python sides must agree.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from .jsonlimits import JsonRefused, loads_bounded
from .protocol import (CLIENT_MESSAGE_TYPES, ERROR_CODES, GEMM_KINDS, GEMM_OPERANDS, HADAMARD_BLOCKS, LIMITS, PRECISIONS, ROTATIONS,
                       ROUNDINGS, RUN_END_STATUSES, SERVER_MESSAGE_TYPES, TELEMETRY_TYPES, WGRAD_ERROR_SCOPES)
from .schema import (MAX_DOUBLE, MAX_SAFE_INTEGER, MISSING, Invalid, array_of, boolean, has_unknown_type, int_in, iso_date_time,
                     literal, non_neg_int, nullable, num, num_in, obj, optional, partial_of, record_of, refined, string, union)

MAX_SCALE_EXP = 127

# ---------------------------------------------------------------- run config (config.ts)


def _scalar(value, path):
    if isinstance(value, str):
        return string(256)(value, path)
    return value if isinstance(value, bool) else num(value, path)


_gemm_fields = {"precision": literal(*PRECISIONS), "rotation": literal(*ROTATIONS), "hadamardBlock": literal(*HADAMARD_BLOCKS),
                "rounding": literal(*ROUNDINGS), "srPrescale": boolean,
                # protocol 1.2: the MX scale rule and NVFP4's 16x16 weight tiles (absent: floor, 1x16)
                "scaleRule": optional(literal("floor", "rceil", "even")), "nvfp4Weight2d": optional(boolean)}
gemm_config_schema = obj(_gemm_fields)
run_config_schema = obj({
    "preset": string(128), "seed": non_neg_int, "steps": non_neg_int, "tokensPerStep": non_neg_int,
    "statsEvery": int_in(1, 1_000_000), "statsLayerGroups": optional(int_in(1, 1024)),  # protocol 1.3, optional
    "wgradErrorScope": optional(literal(*WGRAD_ERROR_SCOPES)),  # protocol 1.4, optional
    "wgradErrorRowStride": optional(int_in(1, 1024)),  # protocol 1.5, optional
    "wgradErrorLag1": optional(boolean),  # protocol 1.8, optional
    "sketchSize": int_in(0, 4096), "evalEvery": non_neg_int, "data": string(4096),
    "gemms": obj({kind: gemm_config_schema for kind in GEMM_KINDS}),
    "model": record_of(_scalar, 64), "optimizer": record_of(_scalar, 64),
})
_partial_gemm = partial_of({key: field.schema if isinstance(field, optional) else field for key, field in _gemm_fields.items()}, "a GEMM config")
next_run_config_schema = partial_of({
    "gemms": partial_of({kind: _partial_gemm for kind in GEMM_KINDS}, "a map of fprop/dgrad/wgrad"),
    "seed": non_neg_int, "steps": int_in(1, 100_000_000), "statsEvery": int_in(1, 1_000_000),
    "statsLayerGroups": int_in(1, 1024), "wgradErrorRowStride": int_in(1, 1024),  # protocol 1.6
    "wgradErrorLag1": boolean,  # protocol 1.8
    "preset": string(128),
}, "a next-run config")

# ---------------------------------------------------------------- client → server (wire.ts)

_id = string(128)
_version = obj({"major": int_in(0, 1000), "minor": int_in(0, 1000)})
_name_version = obj({"name": string(128), "version": string(64)})

client_message_schema = union({
    "hello": obj({"type": literal("hello"), "id": _id, "protocol": _version, "client": _name_version}),
    "subscribe": obj({"type": literal("subscribe"), "id": _id, "from": optional(non_neg_int)}),
    "setNextRunConfig": obj({"type": literal("setNextRunConfig"), "id": _id, "change": next_run_config_schema}),
    "startRun": obj({"type": literal("startRun"), "id": _id, "fromCheckpoint": optional(string(4096))}),
    "stopRun": obj({"type": literal("stopRun"), "id": _id}),
    "saveCheckpoint": obj({"type": literal("saveCheckpoint"), "id": _id}),
})

# ---------------------------------------------------------------- telemetry (telemetry.ts)

_run_id = string(256)
_ratio = nullable(num)
_rotation_fit = obj({"status": literal("none", "rotated", "padded", "skipped"),
                     "dim": optional(int_in(1, 1 << 30)), "paddedTo": optional(int_in(1, 1 << 30))})  # protocol 1.1
_layer_info = obj({"name": string(LIMITS["name"]), "kind": string(64), "block": int_in(-1, 1_000_000),
                   "outFeatures": int_in(1, 1 << 30), "inFeatures": int_in(1, 1 << 30),
                   "sketchIndices": optional(array_of(non_neg_int, LIMITS["sketch"])),  # protocol 1.7: absent from every layer or none
                   "rotationFit": optional(obj({kind: _rotation_fit for kind in GEMM_KINDS}))})
#: protocol 1.2: the block format an operand's stats measure, its scale-histogram kind and elements per scale
STATS_FORMAT_SHAPES = {"mxfp4": ("e8m0", (32,)), "mxfp8-e4m3": ("e8m0", (32,)), "mxfp8-e5m2": ("e8m0", (32,)), "nvfp4": ("e4m3", (16, 256))}
MAX_E4M3_SCALE_CODE = 126
_operand_stats = obj({
    "operand": literal("x", "w", "dy"), "blocks": non_neg_int, "elements": non_neg_int,
    "format": optional(literal(*STATS_FORMAT_SHAPES)), "blockSize": optional(literal(16, 32, 256)),
    "histogram": obj({"kind": optional(literal("e8m0", "e4m3")), "minExp": int_in(-127, 127),
                      "counts": array_of(non_neg_int, LIMITS["histogramBins"]), "nanBlocks": non_neg_int}),
    "saturatedFrac": num_in(0, 1), "flushedFrac": num_in(0, 1), "sqnrDb": _ratio, "kernel": optional(boolean),
})
_wgrad_error = obj({
    "gradNorm": num_in(0, MAX_DOUBLE), "errNorm": num_in(0, MAX_DOUBLE), "relErr": _ratio, "cosErrGrad": _ratio,
    "alignment": _ratio, "gradToErr": _ratio, "lag1Cos": _ratio,
    "sketch": array_of(num, LIMITS["sketch"]), "sketchPrev": nullable(array_of(num, LIMITS["sketch"])),
})


def _check_layers(record: dict, path: str) -> None:
    """runStarted.unique-layer-names, runStarted.sketch-listed, runStarted.sketch-count, runStarted.sketch-in-weight."""
    names = set()
    listed = bool(record["layers"]) and "sketchIndices" in record["layers"][0]
    for i, layer in enumerate(record["layers"]):
        at = f"{path}.layers[{i}]"
        if layer["name"] in names:
            raise Invalid(f"{at}.name", "a layer name not used by an earlier layer (names are unique in a run)", layer["name"])
        names.add(layer["name"])
        indices = layer.get("sketchIndices")
        if (indices is not None) != listed:
            raise Invalid(f"{at}.sketchIndices", f"listed by every layer or by none (layers[0] {'lists them' if listed else 'does not'})", indices)
        if indices is None:
            continue
        if len(indices) > record["config"]["sketchSize"]:
            raise Invalid(f"{at}.sketchIndices", f"at most config.sketchSize = {record['config']['sketchSize']} indices", indices)
        weight = layer["outFeatures"] * layer["inFeatures"]
        for j, index in enumerate(indices):
            if index >= weight:
                raise Invalid(f"{at}.sketchIndices[{j}]", f"an index into the {layer['outFeatures']}×{layer['inFeatures']} weight (below {weight})", index)


def _check_layer_stats(record: dict, path: str) -> None:
    """layerStats.operand-pair, .blocks-sum, .exponent-range, .wgradError-on-wgrad, .sketch-prev-length."""
    pair = GEMM_OPERANDS[record["gemm"]]
    operands = record["operands"]
    if len(operands) != 2:
        raise Invalid(f"{path}.operands", f"the {record['gemm']} GEMM's two operands [{', '.join(pair)}]", operands)
    for i, operand in enumerate(operands):
        at = f"{path}.operands[{i}]"
        if operand["operand"] != pair[i]:
            raise Invalid(f"{at}.operand", f'"{pair[i]}" ({record["gemm"]} operands are [{", ".join(pair)}] in this order)', operand["operand"])
        histogram = operand["histogram"]
        blocks = histogram["nanBlocks"] + sum(histogram["counts"])
        if operand["blocks"] != blocks:
            raise Invalid(f"{at}.blocks", f"sum(histogram.counts) + histogram.nanBlocks = {blocks}", operand["blocks"])
        fmt = operand.get("format", "mxfp4")
        kind, block_sizes = STATS_FORMAT_SHAPES[fmt]
        if histogram.get("kind", "e8m0") != kind:
            raise Invalid(f"{at}.histogram.kind", f"'{kind}' for format {fmt}", histogram.get("kind", "e8m0"))
        if operand.get("blockSize", 32) not in block_sizes:
            raise Invalid(f"{at}.blockSize", f"{' or '.join(map(str, block_sizes))} for format {fmt}", operand.get("blockSize", 32))
        if kind == "e4m3":
            if histogram["minExp"] < 0:
                raise Invalid(f"{at}.histogram.minExp", f"an e4m3 scale code in [0, {MAX_E4M3_SCALE_CODE}]", histogram["minExp"])
            if histogram["minExp"] + len(histogram["counts"]) - 1 > MAX_E4M3_SCALE_CODE:
                raise Invalid(f"{at}.histogram.counts", f"at most {MAX_E4M3_SCALE_CODE - histogram['minExp'] + 1} bins from minExp "
                              f"{histogram['minExp']} (e4m3 scale codes end at {MAX_E4M3_SCALE_CODE})", histogram["counts"])
        if histogram["minExp"] + len(histogram["counts"]) - 1 > MAX_SCALE_EXP:
            raise Invalid(f"{at}.histogram.counts", f"at most {MAX_SCALE_EXP - histogram['minExp'] + 1} bins from minExp {histogram['minExp']} "
                          f"(exponents end at {MAX_SCALE_EXP})", histogram["counts"])
    error = record.get("wgradError")
    if error is None:
        return
    if record["gemm"] != "wgrad":
        raise Invalid(f"{path}.wgradError", f"no wgradError on a {record['gemm']} record (it describes the Wgrad GEMM only)", error)
    if error["sketchPrev"] is not None and len(error["sketchPrev"]) != len(error["sketch"]):
        raise Invalid(f"{path}.wgradError.sketchPrev", f"null or {len(error['sketch'])} entries, as many as sketch", error["sketchPrev"])


def _check_run_ended(record: dict, path: str) -> None:
    """runEnded.diverged-step."""
    if record["status"] == "diverged" and record["step"] < 0:
        raise Invalid(f"{path}.step", 'the step whose loss diverged (≥ 0) when status is "diverged"', record["step"])


telemetry_record_schema = union({
    "runStarted": refined(obj({
        "type": literal("runStarted"), "runId": _run_id, "name": string(LIMITS["name"]), "startedAt": iso_date_time,
        "trainer": _name_version, "config": run_config_schema, "layers": array_of(_layer_info, LIMITS["layers"]),
        "resumedFrom": optional(obj({"path": string(4096), "step": non_neg_int})), "logDir": optional(string(4096)),
    }), _check_layers),
    "step": obj({"type": literal("step"), "runId": _run_id, "step": non_neg_int, "tokens": non_neg_int, "loss": nullable(num),
                 "lr": num, "gradNorm": _ratio, "stepMs": num_in(0, MAX_DOUBLE)}),
    "layerStats": refined(obj({
        "type": literal("layerStats"), "runId": _run_id, "step": non_neg_int, "layer": string(LIMITS["name"]),
        "gemm": literal(*GEMM_KINDS), "precision": literal(*PRECISIONS), "operands": array_of(_operand_stats, 2),
        "wgradError": optional(_wgrad_error), "simulated": optional(boolean),
    }), _check_layer_stats),
    "validation": obj({"type": literal("validation"), "runId": _run_id, "step": non_neg_int, "tokens": non_neg_int, "loss": nullable(num)}),
    "runEnded": refined(obj({"type": literal("runEnded"), "runId": _run_id, "step": int_in(-1, MAX_SAFE_INTEGER),
                             "status": literal(*RUN_END_STATUSES), "reason": string(4096), "endedAt": iso_date_time}), _check_run_ended),
    "checkpointSaved": obj({"type": literal("checkpointSaved"), "runId": _run_id, "step": non_neg_int, "path": string(4096)}),
})

# ---------------------------------------------------------------- server → client (wire.ts)

_control_schema = union({
    "hello": obj({"type": literal("hello"), "seq": non_neg_int, "protocol": _version, "trainer": _name_version,
                  "sessionId": string(128), "capabilities": array_of(string(64), 64), "lastSeq": non_neg_int}),
    "nextRunConfig": obj({"type": literal("nextRunConfig"), "seq": non_neg_int, "config": run_config_schema}),
    "ack": obj({"type": literal("ack"), "seq": non_neg_int, "id": _id, "detail": optional(string(4096))}),
    "error": obj({"type": literal("error"), "seq": non_neg_int, "id": optional(_id), "code": literal(*ERROR_CODES), "message": string(4096)}),
})
_telemetry_seq = int_in(1, MAX_SAFE_INTEGER)


def server_message_schema(value: Any, path: str):
    """Telemetry is numbered from 1 (telemetry.seq-from-1); control messages may carry 0."""
    if isinstance(value, dict) and value.get("type") in TELEMETRY_TYPES:
        _telemetry_seq(value.get("seq", MISSING), f"{path}.seq")
        return telemetry_record_schema(value, path)
    return _control_schema(value, path)


# ---------------------------------------------------------------- reading a frame (src/link/frames.ts)

class Frame(NamedTuple):
    """kind: "message" (valid), "unknown" (a type this side does not know: ignore it) or "invalid"
    (code bad-json or invalid-message, reason naming the field; value is None for bad-json)."""
    kind: str
    value: Any = None
    code: Optional[str] = None
    reason: str = ""


def read_frame(text: str, direction: str) -> Frame:
    """Classify a text frame sent by `direction` ("client" or "server") as frames.ts readFrame does."""
    try:
        value = loads_bounded(text)
    except JsonRefused as error:
        return Frame("invalid", None, "bad-json", str(error))
    known, schema = (CLIENT_MESSAGE_TYPES, client_message_schema) if direction == "client" else (SERVER_MESSAGE_TYPES, server_message_schema)
    if has_unknown_type(value, known):
        return Frame("unknown", value)
    problem = check(schema, value)
    return Frame("invalid", value, "invalid-message", problem) if problem else Frame("message", value)


def check(schema, value) -> Optional[str]:
    """What is wrong with `value` (naming the field), or None."""
    try:
        schema(value, "")
    except Invalid as error:
        return str(error)
    return None

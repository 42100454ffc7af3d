"""The run-log directory (src/runlog): <out>/<runId>/run.json (the runStarted record),
telemetry.ndjson (one record per line) and checkpoints/step-NNNNNNNN.safetensors."""
from __future__ import annotations

import json
import os

RUN_JSON = "run.json"
TELEMETRY_NDJSON = "telemetry.ndjson"
CHECKPOINTS_DIR = "checkpoints"


def checkpoint_path(run_dir: str, step: int) -> str:
    return os.path.join(run_dir, CHECKPOINTS_DIR, f"step-{step:08d}.safetensors")


class EncodedList(list):
    """A list of numbers with its compact JSON text, made where the list was: `compact` writes the text
    instead of encoding the numbers again (a Wgrad error record's two sketches, 128 float32 entries,
    took ~70 µs a record to encode under Python 3.11: a third of the publisher's work for a stats step)."""

    __slots__ = ("json",)

    def __init__(self, values, text: str):
        super().__init__(values)
        self.json = text


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compact(record: dict) -> str:
    """The record as one line of JSON. A layerStats record's wgradError (its last field, as records
    are built) whose sketches are EncodedLists has their text written in, not encoded again."""
    error = record.get("wgradError")
    if type(error) is not dict or not isinstance(error.get("sketch"), EncodedList) or next(reversed(record)) != "wgradError":
        return _dumps(record)
    head = _dumps({key: value for key, value in record.items() if key != "wgradError"})
    keys = list(error)
    first = keys.index("sketch")  # the fields before the sketch in one call, the sketches (and any after) one by one
    parts = [_dumps({key: error[key] for key in keys[:first]})[1:-1]] if first else []
    parts += [f'"{key}":{error[key].json}' if isinstance(error[key], EncodedList) else f"{_dumps(key)}:{_dumps(error[key])}" for key in keys[first:]]
    return f'{head[:-1]},"wgradError":{{{",".join(parts)}}}}}'


class RunLogWriter:
    """Appends records; a step's lines go out in one write when the step record arrives."""

    def __init__(self, run_dir: str, started: dict):
        self.dir = run_dir
        os.makedirs(os.path.join(run_dir, CHECKPOINTS_DIR), exist_ok=True)
        with open(os.path.join(run_dir, RUN_JSON), "w", encoding="utf-8") as f:
            f.write(json.dumps(started, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        self._file = open(os.path.join(run_dir, TELEMETRY_NDJSON), "a", encoding="utf-8")
        self._pending = []
        self.append(started)
        self.flush()

    def append(self, record: dict) -> None:
        self.append_line(compact(record))

    def append_line(self, line: str) -> None:
        """Append a record already encoded with `compact`."""
        self._pending.append(line + "\n")

    def flush(self) -> None:
        if self._pending:
            self._file.write("".join(self._pending))
            self._file.flush()
            self._pending = []

    def close(self) -> None:
        self.flush()
        self._file.close()

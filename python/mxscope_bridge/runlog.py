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


def compact(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


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

"""Bridge: attach MX Scope telemetry to a PyTorch training loop.

    bridge = Bridge(model, run_config(preset="llama-1b", tokens_per_step=4096), out_dir="runs")
    bridge.start_run()
    for step in range(steps):
        bridge.begin_step(step)
        loss = model(...); loss.backward()
        bridge.end_step(loss=loss.item(), lr=lr, grad_norm=norm)
        optimizer.step()
        if bridge.stop_requested: break
    bridge.end_run()

Every observed layer's three GEMMs are measured on steps where step % statsEvery == 0 (and the
Wgrad error also one step earlier, for lag-1 correlation). Under torch.distributed, every rank
measures its own micro-batch, the sums are reduced over the group, and rank 0 publishes.
"""
from __future__ import annotations

import copy
import datetime
import os
import queue
import secrets
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import torch

from . import __version__, stats
from .capture import GEMM_OPERANDS, StepCapture
from .config import GEMM_KINDS, run_config
from .layers import layer_info, observed_modules
from .link import RequestError, TrainerServer
from .observe import Observer
from .rotation import DeviceGenerators
from .runlog import RunLogWriter, checkpoint_path, compact
from .wgrad_error import WgradErrors

TRAINER = {"name": "mxscope-bridge", "version": __version__}
REQUEST_TIMEOUT_S = 60.0


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _finite(value) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


class _TrainingThreadRequest:
    """A client request that the training thread must carry out (at end_step or wait_for_start)."""

    def __init__(self, message: dict):
        self.message = message
        self.done = threading.Event()
        self.detail: Optional[str] = None
        self.error: Optional[RequestError] = None

    def finish(self, detail: Optional[str] = None, error: Optional[RequestError] = None) -> None:
        self.detail, self.error = detail, error
        self.done.set()


class Bridge:
    def __init__(self, model: torch.nn.Module, config: Optional[dict] = None, *, out_dir: Optional[str] = "mxscope-runs",
                 serve: bool = True, host: str = "127.0.0.1", port: int = 0, token: Optional[str] = None,
                 modules=(), process_group=None, save_checkpoint: Optional[Callable[[str], None]] = None,
                 max_queued_stats: int = 20000, print_listening: bool = True, log: Callable[[str], None] = None,
                 on_local_stats: Optional[Callable[[int, list, torch.Tensor], None]] = None, micro_batches: int = 1):
        """`token='generate'` makes one up (printed on the listening line); off loopback one is required.
        `save_checkpoint(path)` serves the saveCheckpoint request (it must write a .safetensors file).
        `on_local_stats(step, keys, vectors)` sees this rank's operand vectors before the reduction
        (keys: (layer, gemm, operand) per row; for checking the reduction).
        `micro_batches`: backward passes per step (gradient accumulation). With 1, each layer's Wgrad
        error is summed as its backward runs and E never outlives it; with more, E and ∇W are kept
        per layer until end_step (weight-sized device memory), so that they sum over micro-batches."""
        self.model = model
        self.config = copy.deepcopy(config or run_config())
        self.out_dir = out_dir
        self.log = log or (lambda line: print(f"mxscope-bridge: {line}", file=sys.stderr))
        self.group = process_group
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self.rank = torch.distributed.get_rank(process_group) if distributed else 0
        self.world = torch.distributed.get_world_size(process_group) if distributed else 1
        self.generators = DeviceGenerators(self.config["seed"] + 7919 * self.rank)
        self.layers = observed_modules(model, modules)
        self.run_id: Optional[str] = None
        self.run_dir: Optional[str] = None
        self.stop_requested = False
        self.step: Optional[int] = None
        self.capture: Optional[StepCapture] = None
        self._save_checkpoint = save_checkpoint
        self._on_local_stats = on_local_stats
        self._requests: "queue.SimpleQueue[_TrainingThreadRequest]" = queue.SimpleQueue()
        self._writer: Optional[RunLogWriter] = None
        self._layer_infos: List[dict] = []
        self._micro_batches = micro_batches
        self._errors: Optional[WgradErrors] = None
        self._step_started = 0.0
        self._emulations = {getattr(m, "_mxscope_emulation", None) for _, m in self.layers} - {None}
        # Hooks are attached only for the steps that capture: other steps run exactly as without the bridge.
        self._observer = Observer([(n, m) for n, m in self.layers if getattr(m, "_mxscope_emulation", None) is None], lambda: self.config["gemms"])
        self.server: Optional[TrainerServer] = None
        if serve and self.rank == 0:
            self.server = TrainerServer(self.config, host=host, port=port, token=token, trainer=TRAINER,
                                        max_queued_stats=max_queued_stats, on_record_written=self._write_record, log=self.log)
            self.server.handle("startRun", self._on_request)
            self.server.handle("stopRun", self._on_request)
            if save_checkpoint is not None:
                self.server.handle("saveCheckpoint", self._on_request)
            if print_listening:
                print(self.server.listening_line(), flush=True)

    # ------------------------------------------------------------------ the next run's config

    @property
    def next_run_config(self) -> dict:
        """The config the next start_run will use (changed by clients' setNextRunConfig)."""
        return copy.deepcopy(self.server.next_run_config if self.server else self.config)

    @property
    def dropped_stats(self) -> int:
        return self.server.dropped_stats if self.server else 0

    def wait_for_start(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Block until a client sends startRun; start that run and return its config (None on timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                request = self._requests.get(timeout=remaining)
            except queue.Empty:
                return None
            if request.message["type"] == "startRun":
                config = self.start_run()
                request.finish(self.run_id)
                return config
            request.finish(error=RequestError("no-active-run", "no run is active"))

    # ------------------------------------------------------------------ run lifecycle

    def start_run(self, name: Optional[str] = None, config: Optional[dict] = None) -> dict:
        """Begin a run with `config` or the next-run config (rank 0's, on every rank); returns it."""
        if self.run_id is not None:
            raise RuntimeError(f"run {self.run_id} is still active: call end_run() first")
        config = copy.deepcopy(config or self.next_run_config)
        if self.world > 1:
            box = [config]
            torch.distributed.broadcast_object_list(box, src=0, group=self.group)
            config = box[0]
        self.config = config
        if self.server:
            self.server.set_next_run_config(copy.deepcopy(config))
        for emulation in self._emulations:
            emulation.gemms = copy.deepcopy(config["gemms"])
        self.run_id = _new_run_id() if self.rank == 0 else None
        if self.world > 1:
            box = [self.run_id]
            torch.distributed.broadcast_object_list(box, src=0, group=self.group)
            self.run_id = box[0]
        self.stop_requested = False
        self._layer_infos = [layer_info(n, m, config["sketchSize"], config["seed"]) for n, m in self.layers]
        sketches = {info["name"]: info["sketchIndices"] for info in self._layer_infos}
        self._errors = WgradErrors(config["sketchSize"], sketches.__getitem__, self.world, self.group, self._micro_batches)
        started = {"type": "runStarted", "runId": self.run_id, "name": name or _describe(config), "startedAt": _now(),
                   "trainer": dict(TRAINER), "config": config, "layers": self._layer_infos}
        if self.rank == 0 and self.out_dir is not None:
            self.run_dir = os.path.abspath(os.path.join(self.out_dir, self.run_id))
            started["logDir"] = self.run_dir
            self._writer = RunLogWriter(self.run_dir, started)
        self._publish(started, logged=True)
        return config

    def begin_step(self, step: int) -> None:
        """Call before the step's forward pass."""
        if self.run_id is None:
            raise RuntimeError("begin_step before start_run: start a run first")
        every = self.config["statsEvery"]
        self.step = step
        self._step_started = time.perf_counter()
        is_stats, before_stats = step % every == 0, (step + 1) % every == 0
        self.capture = StepCapture(is_stats, self.generators, self._errors) if is_stats or before_stats else None
        if self.capture is not None:
            self._errors.begin(step, is_stats, keep=before_stats)
            self._observer.attach(self.capture)
        for emulation in self._emulations:
            emulation.capture = self.capture

    def end_step(self, loss=None, lr: float = 0.0, grad_norm=None, tokens: Optional[int] = None, step_ms: Optional[float] = None) -> None:
        """Call after backward (before or after the optimizer step); publishes the step and its stats.
        Every rank must call it (stats are reduced collectively)."""
        capture, step = self.capture, self.step
        self.capture = None
        self._observer.detach()
        for emulation in self._emulations:
            emulation.capture = None
        records = []
        if capture is not None:
            self._errors.finish_micro_batches()
            records = self._stats_records(capture, step) if capture.with_stats else []
            self._errors.finish()
        elapsed = step_ms if step_ms is not None else (time.perf_counter() - self._step_started) * 1000
        tokens = tokens if tokens is not None else (step + 1) * self.config["tokensPerStep"]
        self._publish({"type": "step", "runId": self.run_id, "step": step, "tokens": int(tokens), "loss": _finite(loss),
                       "lr": float(lr), "gradNorm": _finite(grad_norm), "stepMs": max(0.0, float(elapsed))})
        for record in records:
            self._publish(record)
        self._serve_requests()

    def validation(self, loss, tokens: Optional[int] = None) -> None:
        step = self.step if self.step is not None else 0
        self._publish({"type": "validation", "runId": self.run_id, "step": step,
                       "tokens": int(tokens if tokens is not None else (step + 1) * self.config["tokensPerStep"]), "loss": _finite(loss)})

    def end_run(self, status: str = "completed", reason: str = "") -> None:
        step = self.step if self.step is not None else 0
        if self.stop_requested and status == "completed":
            status, reason = "stopped", reason or "stopped on request"
        self._publish({"type": "runEnded", "runId": self.run_id, "step": step, "status": status,
                       "reason": reason or f"trained {step + 1} steps", "endedAt": _now()})
        if self.server:
            self.server.flush()
        if self._writer:
            self._writer.close()
            self._writer = None
        self.run_id, self.step = None, None

    def close(self) -> None:
        if self.run_id is not None:
            self.end_run("stopped", "bridge closed")
        self._observer.detach()
        if self.server:
            self.server.close()

    # ------------------------------------------------------------------ reduction and records

    def _stats_records(self, capture: StepCapture, step: int) -> List[dict]:
        keys = [(info["name"], gemm) for info in self._layer_infos for gemm in GEMM_KINDS if (info["name"], gemm) in capture.operands]
        rows = [(layer, gemm, op) for layer, gemm in keys for op in GEMM_OPERANDS[gemm]]
        operand_part = stats.operand_vectors([capture.operands[(layer, gemm)][1][op] for layer, gemm, op in rows])
        if self._on_local_stats is not None:
            self._on_local_stats(step, rows, operand_part.to("cpu", copy=True))
        if self.world > 1:
            torch.distributed.all_reduce(operand_part, group=self.group)
        if self.rank != 0:
            return []
        wgrad_rows = self._wgrad_rows()
        operands = iter(stats.operand_records([op for _, _, op in rows], operand_part))
        records = []
        for layer, gemm in keys:
            record = {"type": "layerStats", "runId": self.run_id, "step": step, "layer": layer, "gemm": gemm, "precision": capture.operands[(layer, gemm)][0],
                      "operands": [next(operands) for _ in GEMM_OPERANDS[gemm]]}
            if gemm == "wgrad" and layer in wgrad_rows:
                record["wgradError"] = wgrad_rows[layer]
            records.append(record)
        return records

    def _wgrad_rows(self) -> Dict[str, dict]:
        """Each layer's WgradError, from one concatenated vector that reaches the host in one transfer."""
        layers, vector = self._errors.records_vector([info["name"] for info in self._layer_infos])
        if vector is None:
            return {}
        flat = vector.cpu().tolist()
        length = len(flat) // len(layers)
        return {n: self._errors.record(flat[i * length:(i + 1) * length]) for i, n in enumerate(layers)}

    # ------------------------------------------------------------------ publishing

    def _publish(self, record: dict, logged: bool = False) -> None:
        if self.rank != 0:
            return
        if self.server:
            self.server.publish(record)
        elif self._writer and not logged:
            self._write_record(record, compact(record))

    def _write_record(self, record: dict, line: str) -> None:
        # Called by the server's pump thread (or directly without a server), in seq order.
        writer = self._writer
        if writer is None or record["type"] == "runStarted":
            return
        writer.append_line(line)
        if record["type"] in ("step", "runEnded", "checkpointSaved"):
            writer.flush()

    # ------------------------------------------------------------------ client requests

    def _on_request(self, message: dict) -> Optional[str]:
        kind = message["type"]
        if kind == "startRun" and self.run_id is not None:
            raise RequestError("run-active", f"run {self.run_id} is still active: send stopRun first")
        if kind in ("stopRun", "saveCheckpoint") and self.run_id is None:
            raise RequestError("no-active-run", f"no run is active: nothing to {'stop' if kind == 'stopRun' else 'checkpoint'}")
        if kind == "startRun" and message.get("fromCheckpoint"):
            raise RequestError("not-supported", "this bridge starts runs from step 0 only; resume from a checkpoint in the training script")
        request = _TrainingThreadRequest(message)
        self._requests.put(request)
        if not request.done.wait(REQUEST_TIMEOUT_S):
            raise RequestError("internal", f"the training script did not take the {kind} request within {REQUEST_TIMEOUT_S:.0f} s")
        if request.error:
            raise request.error
        return request.detail

    def _serve_requests(self) -> None:
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            kind = request.message["type"]
            if kind == "stopRun":
                self.stop_requested = True
                request.finish(f"stopping after step {self.step}")
            elif kind == "saveCheckpoint":
                path = checkpoint_path(self.run_dir or ".", self.step)
                try:
                    self._save_checkpoint(path)
                except Exception as error:  # report it to the client; training goes on
                    request.finish(error=RequestError("internal", f"saving {path} failed: {error}"))
                    continue
                self._publish({"type": "checkpointSaved", "runId": self.run_id, "step": self.step, "path": path})
                request.finish(path)
            else:
                request.finish(error=RequestError("run-active", f"run {self.run_id} is still active: send stopRun first"))


def _describe(config: dict) -> str:
    gemm = config["gemms"]["wgrad"]
    label = gemm["precision"]
    if gemm["precision"] == "mxfp4":
        rotation = {"hadamard": f"H{gemm['hadamardBlock']}", "random-hadamard": f"RHT{gemm['hadamardBlock']}"}.get(gemm["rotation"], "")
        rounding = ("SR¾" if gemm["srPrescale"] else "SR") if gemm["rounding"] == "stochastic" else ""
        parts = "+".join(p for p in (rotation, rounding) if p)
        label = f"mxfp4 · {parts}" if parts else "mxfp4"
    return f"{config['preset']} · wgrad {label}"

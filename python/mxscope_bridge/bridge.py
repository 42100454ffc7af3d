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
from .capture import GEMM_OPERANDS, StepCapture, quantized_wgrad
from .config import GEMM_KINDS, run_config
from .layers import layer_info, observed_modules
from .link import RequestError, TrainerServer
from .protocol import describe_gemm
from .rotation import DeviceGenerators
from .runlog import RunLogWriter, checkpoint_path, compact

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
                 no_token: bool = False, allowed_origins=(),
                 modules=(), process_group=None, save_checkpoint: Optional[Callable[[str], None]] = None,
                 max_queued_stats: int = 20000, print_listening: bool = True, log: Callable[[str], None] = None,
                 on_local_stats: Optional[Callable[[int, list, torch.Tensor], None]] = None):
        """Clients must present `token`; without one it is $MXSCOPE_TOKEN or generated, and printed on the
        listening line. `no_token=True` serves without one (loopback only). `allowed_origins`: browser
        origins allowed to connect (others are refused; MX Scope itself sends no Origin).
        `save_checkpoint(path)` serves the saveCheckpoint request (it must write a .safetensors file).
        `on_local_stats(step, keys, vectors)` sees this rank's operand vectors before the reduction
        (keys: (layer, gemm, operand) per row; for checking the reduction)."""
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
        self._sketch: Dict[str, torch.Tensor] = {}
        self._prev_err: Dict[str, torch.Tensor] = {}
        self._prev_step: Optional[int] = None
        self._step_started = 0.0
        self._hooks = []
        self._emulations = {getattr(m, "_mxscope_emulation", None) for _, m in self.layers} - {None}
        for name, module in self.layers:
            if getattr(module, "_mxscope_emulation", None) is None:
                self._hooks.append(module.register_forward_hook(self._forward_hook(name)))
        self.server: Optional[TrainerServer] = None
        if serve and self.rank == 0:
            self.server = TrainerServer(self.config, host=host, port=port, token=token, no_token=no_token,
                                        allowed_origins=allowed_origins, trainer=TRAINER,
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
        self._prev_err, self._prev_step = {}, None
        self._layer_infos = [layer_info(n, m, config["sketchSize"], config["seed"]) for n, m in self.layers]
        self._sketch = {}
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
        self.capture = StepCapture(is_stats, self.generators) if is_stats or before_stats else None
        for emulation in self._emulations:
            emulation.capture = self.capture

    def end_step(self, loss=None, lr: float = 0.0, grad_norm=None, tokens: Optional[int] = None, step_ms: Optional[float] = None) -> None:
        """Call after backward (before or after the optimizer step); publishes the step and its stats.
        Every rank must call it (stats are reduced collectively)."""
        capture, step = self.capture, self.step
        self.capture = None
        for emulation in self._emulations:
            emulation.capture = None
        records = self._finish_capture(capture, step) if capture is not None else []
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
        for hook in self._hooks:
            hook.remove()
        if self.server:
            self.server.close()

    # ------------------------------------------------------------------ observation (hooks)

    def _forward_hook(self, name: str):
        def hook(module, inputs, output):
            capture = self.capture
            if capture is None or not torch.is_grad_enabled() or not isinstance(output, torch.Tensor):
                return
            x = inputs[0].detach()
            x2 = x.reshape(-1, x.shape[-1])
            weight = module.weight.detach()
            if hasattr(weight, "full_tensor"):  # a DTensor (FSDP2 outside its unshard window)
                weight = weight.full_tensor()
            gemms = self.config["gemms"]
            capture.observe_operands(name, "fprop", gemms["fprop"], x2, weight)
            capture.observe_operands(name, "dgrad", gemms["dgrad"], None, weight.t())
            if output.requires_grad:
                def on_grad(dy):
                    dy2 = dy.detach().reshape(-1, dy.shape[-1])
                    capture.observe_operands(name, "dgrad", gemms["dgrad"], dy2, None)
                    quantized_wgrad(name, gemms["wgrad"], dy2, x2.to(dy2.dtype), self.generators(dy2.device), capture)
                output.register_hook(on_grad)
        return hook

    # ------------------------------------------------------------------ reduction and records

    def _finish_capture(self, capture: StepCapture, step: int) -> List[dict]:
        dist = torch.distributed
        if self.world > 1:  # E and ∇W of the whole data-parallel batch: the mean over ranks, like DDP's
            for info in self._layer_infos:
                for tensor in capture.wgrad.get(info["name"], ()):
                    dist.all_reduce(tensor, group=self.group)
                    tensor.div_(self.world)
        records: List[dict] = []
        if capture.with_stats:
            records = self._stats_records(capture, step)
        keep = (step + 1) % self.config["statsEvery"] == 0
        self._prev_err = {layer: eg[0] for layer, eg in capture.wgrad.items()} if keep else {}
        self._prev_step = step if keep else None
        return records

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
        wgrad_layers = [info["name"] for info in self._layer_infos if info["name"] in capture.wgrad]
        wgrad_rows = self._wgrad_rows(capture, step, wgrad_layers)
        operands = iter(stats.operand_records([op for _, _, op in rows], operand_part))
        records = []
        for layer, gemm in keys:
            record = {"type": "layerStats", "runId": self.run_id, "step": step, "layer": layer, "gemm": gemm, "precision": capture.operands[(layer, gemm)][0],
                      "operands": [next(operands) for _ in GEMM_OPERANDS[gemm]]}
            if gemm == "wgrad" and layer in wgrad_rows:
                record["wgradError"] = wgrad_rows[layer]
            records.append(record)
        return records

    def _wgrad_rows(self, capture: StepCapture, step: int, layers: List[str]) -> Dict[str, dict]:
        """Each layer's WgradError, from one concatenated vector that reaches the host in one transfer."""
        k = self.config["sketchSize"]
        prev = {n: self._prev_err.get(n) if self._prev_step == step - 1 else None for n in layers}
        parts = [stats.wgrad_vector(*capture.wgrad[n], prev[n], self._sketch_index(n, capture.wgrad[n][0].device)) for n in layers]
        flat = torch.cat(parts).cpu().tolist() if parts else []
        errors, offset = {}, 0
        for n in layers:
            length = stats.wgrad_length(k, prev[n] is not None)
            errors[n] = stats.wgrad_error(flat[offset:offset + length], k, prev[n] is not None)
            offset += length
        return errors

    def _sketch_index(self, name: str, device) -> torch.Tensor:
        if name not in self._sketch:
            info = next(i for i in self._layer_infos if i["name"] == name)
            self._sketch[name] = torch.tensor(info["sketchIndices"], dtype=torch.long, device=device)
        return self._sketch[name]

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
    return f"{config['preset']} · wgrad {describe_gemm(config['gemms']['wgrad'])}"

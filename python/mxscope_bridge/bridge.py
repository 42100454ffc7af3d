"""Bridge: attach MX Scope telemetry to a PyTorch training loop.

    with Bridge(model, run_config(preset="llama-1b", tokens_per_step=4096), emulate=True) as bridge:
        for run in bridge.runs():                 # each Start pressed in the extension
            reset(model, run.seed); optimizer = make_optimizer(model)
            for step in run.steps():
                loss = model(...); loss.backward()
                run.end_step(loss=loss, lr=lr)    # a tensor: read later, the step never waits for the GPU
                optimizer.step(); optimizer.zero_grad()

or by hand: start_run(), begin_step(step) / end_step(...) per step, end_run(), close().

Every observed layer's three GEMMs are measured on steps where step % statsEvery == 0 (and the
Wgrad error also one step earlier, for lag-1 correlation); with the opt-in statsLayerGroups = N,
each stats step measures one N-th of the layers in turn (`_layer_group`). Under torch.distributed, every rank
measures its own micro-batch, the sums are reduced over the group, and rank 0 publishes.
"""
from __future__ import annotations

import copy
import datetime
import errno
import os
import queue
import secrets
import sys
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple, Union

import torch

from . import __version__, compile_stance, emulate as emulation_module, gc_freeze, link, stats
from .backward_worker import BackwardWorker
from .capture import GEMM_OPERANDS, StepCapture
from .config import GEMM_KINDS, check_gemm, check_layer_groups, check_wgrad_error_lag1, check_wgrad_error_row_stride, check_wgrad_error_scope, run_config
from .kernel import from_mx_tensor, kernel_quantized
from .layers import LinearLike, layer_info, observed_modules, rotation_fits
from .lifecycle import end_reason, install_exit_handlers
from .link import TOKEN_ENV, RequestError, TrainerServer, listed_within_a_frame
from .record_pump import RecordPump
from .observe import ObserveState, declared_precisions, observer_hook, observer_pre_hook
from .protocol import describe_gemm
from .draws import RandomSource
from .experts import ExpertSlice
from .rotation import MISFITS
from .remembered import remembered_token
from .runloop import Run, serve_runs
from .step_stats import StepStats
from .wgrad_error import WgradErrors, default_host_budget
from .runlog import RunLogWriter, checkpoint_path, compact
from .deferred import finite as _finite, resolved, step_record

TRAINER = {"name": "mxscope-bridge", "version": __version__}
REQUEST_TIMEOUT_S = 60.0
#: The extension's default URL is ws://127.0.0.1:7340; the bridge listens there unless it is taken.
DEFAULT_PORT = 7340
#: Expert layers from which a run measuring every layer on every stats step is told what that costs:
#: ~1 ms of host time per expert layer and stats step on a GPU (docs/bridge.md, "A mixture-of-experts model").
MANY_EXPERT_LAYERS = 256


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_run_id() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


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
                 serve: bool = True, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: Optional[str] = None,
                 no_token: bool = False, allowed_origins=(),
                 include=None, exclude=(), adapters: Optional[Dict[str, LinearLike]] = None, modules=(),
                 precision: Union[None, str, Dict[str, str]] = None, emulate: bool = False, hadamard_misfit: str = "pad",
                 process_group=None, save_checkpoint: Optional[Callable[[str], None]] = None,
                 max_queued_stats: int = 20000, print_listening: bool = True, log: Callable[[str], None] = None,
                 on_local_stats: Optional[Callable[[int, list, torch.Tensor], None]] = None, handle_exit: bool = True,
                 micro_batches: int = 1, backward_thread: Optional[bool] = None, freeze_gc: bool = True,
                 lag1_host_bytes: Optional[int] = None):
        """Attach to `model`; python/README.md documents every argument. Raises ValueError, naming
        the layer, GEMM and dimension, for a configuration no layer can honour. Clients must present
        `token`; without one it is $MXSCOPE_TOKEN or generated, and printed on the listening line.
        `no_token=True` serves without one (loopback only). `allowed_origins`: browser origins allowed
        to connect (others are refused; MX Scope itself sends no Origin). `micro_batches`: backward
        passes per step (gradient accumulation): with 1, each layer's Wgrad error is summed as its
        backward runs and E never outlives it; with more, E and ∇W wait per layer until end_step
        (weight-sized device memory), so that they sum over the micro-batches. `freeze_gc`: the objects
        alive when a run starts are frozen out of garbage collection until it ends (gc_freeze.py).
        `lag1_host_bytes`: host memory E_{t−1} may take for lag-1 (default: half the host's, shared by
        its torchrun processes); layers past it report no lag-1, and the bridge says which."""
        self.model = model
        self.config = copy.deepcopy(config or run_config())
        self.out_dir = out_dir
        self.log = log or (lambda line: print(f"mxscope-bridge: {line}", file=sys.stderr))
        self._freeze_gc = freeze_gc
        self.group = process_group
        if hadamard_misfit not in MISFITS:
            raise ValueError(f"hadamard_misfit {hadamard_misfit!r} is not one of {', '.join(MISFITS)}")
        self.misfit = hadamard_misfit
        self._declared = declared_precisions(precision)
        self._emulate = emulate
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self.rank = torch.distributed.get_rank(process_group) if distributed else 0
        self.world = torch.distributed.get_world_size(process_group) if distributed else 1
        self.random = RandomSource(self.config["seed"] + 7919 * self.rank)
        self.layers = observed_modules(model, include, exclude, adapters, modules)
        self._names = {name for name, _, _ in self.layers}
        self._checked_fits(self.config)  # refuse at attach time a recipe that cannot run, and what no layer can honour
        self.run_id: Optional[str] = None
        self.run_dir: Optional[str] = None
        self.stop_requested = False
        self.step: Optional[int] = None
        self.capture: Optional[StepCapture] = None
        self._save_checkpoint = save_checkpoint
        self._on_local_stats = on_local_stats
        self._requests: "queue.SimpleQueue[_TrainingThreadRequest]" = queue.SimpleQueue()
        self._stop_acks: List[_TrainingThreadRequest] = []
        self._writer: Optional[RunLogWriter] = None
        self._layer_infos: List[dict] = []
        self._micro_batches = micro_batches
        if lag1_host_bytes is not None and (not isinstance(lag1_host_bytes, int) or lag1_host_bytes < 0):
            raise ValueError(f"lag1_host_bytes must be a whole number of bytes ≥ 0, got {lag1_host_bytes!r}")
        #: host memory E_{t−1} may take (wgrad_error.HostErrorStore); under torch.distributed rank 0's, given to all at start_run
        self._lag1_budget = lag1_host_bytes if lag1_host_bytes is not None else default_host_budget()
        self._errors: Optional[WgradErrors] = None
        #: this run's wgradErrorScope is "rank": each rank's own Wgrad error, reduced only at end_step
        self._per_rank = False
        #: per capturing step: what the hooks carry from forward (and checkpoint recomputes) to backward
        self.observing = ObserveState()
        self._step_started = 0.0
        #: the last step's record, sent when the next step begins (or the run ends): see _send_step
        self._unsent_step: Optional[dict] = None
        #: (step, tokens) of the last step published: a validation at that step reports the same count
        self._tokens_at: Optional[Tuple[int, int]] = None
        self._left_run: Optional[dict] = None
        self._closed = False
        self._emulations: set = set()
        self._emulation_generation = -1
        self._own_emulation: Optional[emulation_module.Emulation] = None
        #: the observing hooks, present only between begin_step and end_step of a capturing step: a
        #: module with hooks takes nn.Module's slower call path, which idle steps need not pay
        self._hooks: list = []
        #: compiled code's stance while the hooks are attached (compile_stance)
        self._stance = None
        #: observed layers already named for running no GEMM on a stats step
        self._named_silent: Set[str] = set()
        if backward_thread and self.world > 1:
            raise ValueError("backward_thread=True under torch.distributed: a worker thread's collectives beside the trainer's hung DDP "
                             "and FSDP2 runs on 2 × H100 (docs/bridge.md, Distributed); leave backward_thread unset "
                             "(runs with wgradErrorScope 'rank' issue no collective in backward and use the worker by themselves)")
        self._worker = BackwardWorker() if backward_thread is not False else None
        self.server: Optional[TrainerServer] = None
        if serve and self.rank == 0:
            if token is None and not no_token and port == DEFAULT_PORT and not os.environ.get(TOKEN_ENV):
                token = remembered_token(self.log)  # a fixed URL across restarts: nothing to paste again
            self.server = self._listen(host, port, token, no_token, allowed_origins, max_queued_stats)
            self.server.handle("startRun", self._on_request)
            self.server.handle("stopRun", self._on_request)
            if save_checkpoint is not None:
                self.server.handle("saveCheckpoint", self._on_request)
            if print_listening:
                print(self.server.listening_line(), flush=True)
        #: without a server, the run log is written by a thread of its own: reading a step's loss
        #: or its stats on the training thread would wait for the GPU at every end_step
        self._log_pump: Optional[RecordPump] = None
        if self.server is None and self.rank == 0 and out_dir is not None:
            self._log_pump = RecordPump(lambda record: self._write_record(record, compact(resolved(record))), self.log, max_queued_stats)
        if handle_exit:
            install_exit_handlers(self)

    def _listen(self, host: str, port: int, token: Optional[str], no_token: bool, allowed_origins, max_queued_stats: int) -> TrainerServer:
        def server(at_port: int) -> TrainerServer:
            return TrainerServer(self.config, host=host, port=at_port, token=token, no_token=no_token, allowed_origins=allowed_origins,
                                 trainer=TRAINER, max_queued_stats=max_queued_stats, on_record_written=self._write_record, log=self.log)
        try:
            return server(port)
        except OSError as error:
            if port != DEFAULT_PORT or error.errno != errno.EADDRINUSE:
                raise
            self.log(f"port {DEFAULT_PORT} is taken (another bridge or trainer?): listening on a free port instead; connect to the URL below")
            return server(0)

    # ------------------------------------------------------------------ context manager and runs loop

    def __enter__(self) -> "Bridge":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Ends an active (or just-left) run by how the block exited, then closes (clients get 1001)."""
        self._end_by(exc)
        self.close()

    def runs(self, idle_timeout: Optional[float] = None, max_runs: Optional[int] = None) -> Iterator[Run]:
        """Serve runs: wait for the extension's Start, start the run with the next-run config (the
        emulated GEMMs follow it) and yield a Run; a run body that returns ends the run completed
        (stopped, if a stop was requested). Leaving the loop (break, an exception, Ctrl-C) ends the
        active run when the bridge closes or is next used: stopped, or failed with the exception's
        message when it reaches `with Bridge(...)` or the top level. Stops after `idle_timeout`
        seconds without a Start, after `max_runs` runs, or when the bridge closes."""
        return serve_runs(self, idle_timeout, max_runs)

    # ------------------------------------------------------------------ the next run's config

    @property
    def next_run_config(self) -> dict:
        """The config the next start_run will use (changed by clients' setNextRunConfig)."""
        return copy.deepcopy(self.server.next_run_config if self.server else self.config)

    @property
    def _publisher(self):
        """Where records go: the server (sockets and run log), or the run log's own pump; None on
        other ranks and without a run log."""
        return self.server or self._log_pump

    @property
    def dropped_stats(self) -> int:
        return self._publisher.dropped_stats if self._publisher else 0

    @property
    def closed(self) -> bool:
        return self._closed

    def wait_for_start(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Block until a client sends startRun; start that run and return its config (None on
        timeout or when the bridge closes). A config no layer can honour is refused to the client.
        Under torch.distributed every rank calls it: the others wait in a collective for rank 0."""
        self._finish_left_run("stopped", "the script left the run loop")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            request = self._next_start_request(deadline) if self.rank == 0 else None
            if self.world > 1:
                box = [request is not None]
                torch.distributed.broadcast_object_list(box, src=0, group=self.group)
                starting = box[0]
            else:
                starting = request is not None
            if not starting:
                return None
            try:
                config = self.start_run()
            except ValueError as error:
                if request is not None:
                    request.finish(error=RequestError("invalid-message", str(error)))
                    self.log(f"refused a startRun: {error}")
                continue
            if request is not None:
                request.finish(self.run_id)
            return config

    def _next_start_request(self, deadline: Optional[float]) -> Optional[_TrainingThreadRequest]:
        """Rank 0: the next startRun request (others are answered here), or None at the deadline or on close."""
        while not self._closed:
            remaining = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if remaining <= 0:
                return None
            try:
                request = self._requests.get(timeout=remaining)
            except queue.Empty:
                continue
            if request.message["type"] == "startRun":
                return request
            request.finish(error=RequestError("no-active-run", "no run is active"))
        return None

    def stop_agreed(self) -> bool:
        """stop_requested as rank 0 sees it, on every rank (a collective when distributed: every
        rank must call it at the same step; Run.steps() does)."""
        if self.world == 1:
            return self.stop_requested
        box = [self.stop_requested]
        torch.distributed.broadcast_object_list(box, src=0, group=self.group)
        self.stop_requested = box[0]
        return self.stop_requested

    # ------------------------------------------------------------------ run lifecycle

    def start_run(self, name: Optional[str] = None, config: Optional[dict] = None) -> dict:
        """Begin a run with `config` or the next-run config (rank 0's, on every rank); returns it."""
        self._finish_left_run("stopped", "the script left the run loop")
        if self.run_id is not None:
            raise RuntimeError(f"run {self.run_id} is still active: call end_run() first")
        config = copy.deepcopy(config or self.next_run_config)
        if self.world > 1:
            box = [config]
            torch.distributed.broadcast_object_list(box, src=0, group=self.group)
            config = box[0]
        fits = self._checked_fits(config)
        self.config = config
        if self.server:
            self.server.set_next_run_config(copy.deepcopy(config))
        self._sync_emulations(force=True)
        self.run_id = _new_run_id() if self.rank == 0 else None
        if self.world > 1:
            # One budget on every rank (hosts with more memory than rank 0's keep to its): ranks pool
            # their lag-1 sums, so they must keep the same layers' E_{t−1}.
            box = [self.run_id, self._lag1_budget]
            torch.distributed.broadcast_object_list(box, src=0, group=self.group)
            self.run_id, self._lag1_budget = box
        self.stop_requested = False
        self.step, self._tokens_at = None, None
        row_stride = config.get("wgradErrorRowStride", 1)
        self._layer_infos = [dict(layer_info(n, m, config["sketchSize"], config["seed"], a, row_stride), rotationFit=fit)
                             for (n, m, a), fit in zip(self.layers, fits)]
        sketches = {info["name"]: info["sketchIndices"] for info in self._layer_infos}
        self._per_rank = config.get("wgradErrorScope", "batch") == "rank"
        self._errors = WgradErrors(config["sketchSize"], sketches.__getitem__, 1 if self._per_rank else self.world, self.group, self._micro_batches,
                                   row_stride=row_stride, host_budget=0 if config.get("wgradErrorLag1", True) is False else self._lag1_budget,
                                   pooled=self.world > 1)
        started = {"type": "runStarted", "runId": self.run_id, "name": name or _describe(config), "startedAt": _now(),
                   "trainer": dict(TRAINER), "config": config, "layers": self._layer_infos}
        if self.rank == 0:  # the only rank that logs and publishes
            if self.out_dir is not None:
                self.run_dir = os.path.abspath(os.path.join(self.out_dir, self.run_id))
                started["logDir"] = self.run_dir
            started, listed_size = listed_within_a_frame(started)
            if listed_size is not None:
                self.log(f"runStarted: listing the sketch positions of all {len(self._layer_infos)} layers would make it {listed_size / 2 ** 20:.1f} MiB, "
                         f"over the {link.HARD_FRAME_BYTES // 2 ** 20} MiB a client reads, so no layer lists them; the Wgrad error sketches still "
                         "follow them (mxscope_bridge.layers.sketch_indices gives them)")
            if self.out_dir is not None:
                self._writer = RunLogWriter(self.run_dir, started)
            self._publish(started, logged=True)
        self._hint_at_expert_cost(config)
        if self._freeze_gc:
            gc_freeze.freeze_for(self)
        return config

    def _hint_at_expert_cost(self, config: dict) -> None:
        experts = sum(isinstance(module, ExpertSlice) for _, module, _ in self.layers)
        if self.rank != 0 or experts < MANY_EXPERT_LAYERS or config.get("statsLayerGroups", 1) > 1:
            return
        self.log(f"{experts} of the {len(self.layers)} layers are experts, each measured on every stats step: about 0.3-0.4 ms of host "
                 f"time per expert layer and stats step on a GPU (+25-55 % step time at statsEvery 10 on 1,024 of them, +4-5 % at N = 8, "
                 "+30 % without lag-1). run_config(stats_layer_groups=N), or Set Stats Cadence and Coverage… in the editor, measures every "
                 "N-th layer per stats step; run_config(wgrad_error_lag1=False) spares the step before each stats step "
                 "(docs/bridge.md, \"A mixture-of-experts model\")")

    def begin_step(self, step: int) -> None:
        """Call before the step's forward pass."""
        if self.run_id is None:
            raise RuntimeError("begin_step before start_run: start a run first")
        self._drain_quietly("the step before")  # a step left without end_step (an exception the script caught)
        self._send_step()
        self._sync_emulations()
        every = self.config["statsEvery"]
        self.step = step
        self._step_started = time.perf_counter()
        is_stats, before_stats = step % every == 0, (step + 1) % every == 0
        # The pre-stats step keeps E for the layers its stats step will report (lag-1), but those
        # whose E the host store would not keep: they do no work then.
        observed = self._layer_group(step if is_stats else step + 1)
        if before_stats and not is_stats:
            observed = self._lag1_keepable(observed)
        captures = is_stats or (before_stats and bool(observed))
        self.capture = StepCapture(is_stats, self.random, self.misfit, observed, self._errors) if captures else None
        if self.capture is not None:
            self.capture.tolerates_oom = self.world == 1
        self.observing.release()
        self.observing = ObserveState()
        if self.capture is not None:
            self._errors.begin(step, is_stats, keep=before_stats)
            self._attach_hooks(observed)
        else:
            self._detach_hooks()
        for emulation in self._emulations:
            emulation.capture = self.capture

    @property
    def backward_worker(self) -> Optional[BackwardWorker]:
        """Where the hooks' backward-time work runs this run (None: in the hooks). Under
        torch.distributed only a run whose scope is "rank" has it: each rank's own Wgrad error
        reduces nothing in backward, so the worker cannot issue a collective beside the trainer's."""
        return self._worker if self.world == 1 or self._per_rank else None

    @property
    def wants_stats(self) -> bool:
        """True between begin_step and end_step of a stats step (when kernel_operand is read)."""
        return self.capture is not None and self.capture.with_stats

    def kernel_operand(self, layer: str, gemm: str, operand: str, *, scale=None, codes=None, values=None, original=None,
                       mx_tensor=None, block_size: int = 32, packed: bool = False, nibble_order: str = "low-first") -> None:
        """Hand the bridge the operand a trainer's own MXFP4 kernel quantized, for this step's stats
        (reduction dimension last): E8M0 `scale` bytes with FP4 `codes` or the dequantized `values`,
        or a torchao `mx_tensor`; `original`: the high-precision tensor the kernel quantized (after
        its rotation), for exact saturation, flushing and SQNR. A no-op except on stats steps;
        calls for several micro-batches add up. Its record's operand then carries `kernel: true`."""
        if layer not in self._names:
            raise ValueError(f"kernel_operand: layer {layer!r} is not observed; observed layers look like {sorted(self._names)[:5]}")
        if gemm not in GEMM_OPERANDS or operand not in GEMM_OPERANDS[gemm]:
            raise ValueError(f"kernel_operand: {gemm!r} has no operand {operand!r}; operands are {GEMM_OPERANDS}")
        if not self.wants_stats or not self.capture.observes(layer):  # not a stats step, or not this step's layer group
            return
        given = from_mx_tensor(mx_tensor) if mx_tensor is not None else {"scale": scale, "codes": codes, "block_size": block_size, "packed": packed}
        if given["scale"] is None:
            raise ValueError("kernel_operand: pass scale= (E8M0 bytes) with codes= or values=, or mx_tensor=")
        q = kernel_quantized(values=values if mx_tensor is None else None, original=original, nibble_order=nibble_order,
                             what=f"{layer} {gemm} {operand}", **given)
        self.capture.add_kernel_operand(layer, gemm, operand, stats.operand_sums(q))

    def end_step(self, loss=None, lr: float = 0.0, grad_norm=None, tokens: Optional[int] = None, step_ms: Optional[float] = None) -> None:
        """Call after backward (before or after the optimizer step); publishes the step's stats now and
        its step record when the next step begins (or the run ends), timed from this step's begin_step
        to then: the whole iteration. With `step_ms` (a time the script measured itself) the record
        goes out now with it. Every rank must call it (stats are reduced collectively)."""
        if self.run_id is None:
            raise RuntimeError("end_step with no active run: start a run first")
        if self.backward_worker is not None:
            self.backward_worker.drain()
        capture, step = self.capture, self.step
        self.capture = None
        self._detach_hooks()
        for emulation in self._emulations:
            emulation.capture = None
        self.observing.release()
        self.observing = ObserveState()
        step_stats = None
        if capture is not None and capture.dropped is not None:
            kept_for_lag1 = self._errors.keep  # this step's E was to be the next stats step's E_{t−1}
            self._errors.drop_step()
            self._errors.finish()
            self.log(f"step {step}'s layer stats are dropped: {capture.dropped}. Training goes on; "
                     f"{'the next stats step reports no lag-1. ' if kept_for_lag1 else ''}"
                     "Layer groups (run_config(stats_layer_groups=N)) or a smaller batch leave the bridge more room")
        elif capture is not None:
            self._errors.finish_micro_batches()
            step_stats = self._step_stats(capture, step) if capture.with_stats else None
            if capture.with_stats and self.rank == 0:
                self._name_silent_layers(capture)
            self._errors.finish()
            self._name_refused_layers()
        tokens = int(tokens if tokens is not None else (step + 1) * self.config["tokensPerStep"])
        self._tokens_at = (step, tokens)
        record = step_record({"type": "step", "runId": self.run_id, "step": step, "tokens": tokens, "loss": loss,
                              "lr": float(lr), "gradNorm": grad_norm, "stepMs": max(0.0, float(step_ms or 0.0))})
        if step_stats is not None:
            self._publish_stats(step_stats)
        self._send_step()  # end_step twice without a begin_step between: the first record is not lost
        if step_ms is not None:
            self._publish(record)
        else:
            self._unsent_step = record
        self._serve_requests()

    def validation(self, loss, tokens: Optional[int] = None) -> None:
        """Publish a validation loss for the current step (`tokens` defaults to the step's cumulative
        count: what end_step published for it, else (step + 1) × tokensPerStep)."""
        if self.run_id is None:
            raise RuntimeError("validation with no active run: start a run first")
        step = self.step if self.step is not None else 0
        if tokens is None:
            tokens = self._tokens_at[1] if self._tokens_at is not None and self._tokens_at[0] == step else (step + 1) * self.config["tokensPerStep"]
        self._publish({"type": "validation", "runId": self.run_id, "step": step, "tokens": int(tokens), "loss": _finite(loss)})

    def end_run(self, status: str = "completed", reason: str = "") -> None:
        """End the active run: `completed` (or `stopped` after a stopRun), `stopped`, `diverged`, `failed`."""
        if self.run_id is None:
            return
        step = self.step if self.step is not None else 0
        if self.stop_requested and status == "completed":
            status, reason = "stopped", reason or "stopped on request"
        record = {"type": "runEnded", "runId": self.run_id, "step": step, "status": status,
                  "reason": reason or f"trained {step + 1} steps", "endedAt": _now()}
        self._end(record)

    def _send_step(self) -> None:
        """Publishes the last step's record with its step time: from that step's begin_step to now (the
        next begin_step, or the run's end). The whole iteration, then: end_step comes before the
        optimizer's step and the script's own waits for the GPU (a `loss.item()`), and on a GPU the
        step's kernels mostly run after end_step returns, so begin_step to end_step measured a part of
        the step (on an H100, 142 ms of a 221 ms step), and what telemetry costs came out twice what it is."""
        record, self._unsent_step = self._unsent_step, None
        if record is not None:
            record["stepMs"] = max(0.0, (time.perf_counter() - self._step_started) * 1000)
            self._publish(record)

    def _end(self, record: dict) -> None:
        # The run is over before its runEnded leaves: a client that sends startRun the moment it
        # reads runEnded must not get run-active.
        self._drain_quietly("the run's last step")
        self._send_step()
        self.run_id, self.step, self.capture = None, None, None
        self._detach_hooks()
        gc_freeze.thaw_for(self)
        for emulation in self._emulations:
            emulation.capture = None
        self._publish(record)
        if self._publisher:
            self._publisher.flush()
        if self._writer:
            self._writer.close()
            self._writer = None
        for request in self._stop_acks:
            request.finish("stopped")
        self._stop_acks = []

    def close(self) -> None:
        """End any active run (stopped), remove the hooks, stop serving (clients get close 1001).
        Safe to call twice; `with Bridge(...)` and interpreter exit call it."""
        if self._closed:
            return
        self._finish_left_run("stopped", "the script left the run loop")
        if self.run_id is not None:
            self.end_run(*self._leaving_status(self.step, "stopped", "bridge closed"))
        self._closed = True
        self._detach_hooks()
        # E_{t−1}'s host buffers (pinned: as large as the observed weights in float32) are kept from
        # run to run of this bridge, and let go here: a closed bridge is often still referenced (by a
        # Trainer callback, a notebook), and each one kept its buffers pinned before.
        self._errors = None
        if self.server:
            self.server.close()
        if self._log_pump:
            self._log_pump.close()

    # ------------------------------------------------------------------ runs the script left

    def _leave_run(self) -> None:
        """The script left the run loop with this run active (break, exception): how it left is
        known only later (__exit__, the excepthook, the next call), so the runEnded waits until
        then, keeping the time and step of leaving."""
        if self.run_id is not None:
            self._send_step()  # its time ends when the script left, not when how it left is known
            self._left_run = {"step": self.step if self.step is not None else 0, "endedAt": _now()}

    def _leaving_status(self, step: Optional[int], status: str, reason: str):
        """A run left without an error after its planned steps is completed; after a stopRun, stopped on request."""
        if status != "stopped" or reason.startswith(("interrupted", "the process exited")):
            return status, reason
        if self.stop_requested:
            return "stopped", "stopped on request"
        planned = self.config.get("steps") or 0
        if planned and step is not None and step >= planned - 1:
            return "completed", f"trained {step + 1} steps"
        return status, reason

    def _finish_left_run(self, status: str, reason: str) -> None:
        left, self._left_run = self._left_run, None
        if left is None or self.run_id is None:
            return
        status, reason = self._leaving_status(left["step"], status, reason)
        self._end({"type": "runEnded", "runId": self.run_id, "step": left["step"], "status": status, "reason": reason, "endedAt": left["endedAt"]})

    def _end_by(self, exc: Optional[BaseException]) -> None:
        """End the active (or just-left) run as leaving by `exc` (None: normally) says."""
        status, reason = end_reason(exc, self.step)
        self._finish_left_run(status, reason)
        if self.run_id is not None:
            self.end_run(*self._leaving_status(self.step, status, reason))

    def _on_uncaught(self, exc: BaseException) -> None:
        self._end_by(exc)
        self.close()

    def _drain_quietly(self, which: str) -> None:
        """Let the backward worker finish a step that end_step will not see; what it raised is logged."""
        if self.backward_worker is None:
            return
        try:
            self.backward_worker.drain()
        except Exception as error:
            self.log(f"{which}'s telemetry failed: {error}")

    def _lag1_keepable(self, names: Set[str]) -> Set[str]:
        """Of `names`, the layers whose E_{t−1} the host store may keep for lag-1: none with a budget
        of 0 (lag-1 off: lag1_host_bytes=0, or the run config's wgradErrorLag1 false), else those it
        has not refused (wgrad_error.HostErrorStore)."""
        if self._errors.store.budget == 0:
            return set()
        refused = self._errors.store.refused
        return names - refused if refused else names

    def _layer_group(self, stats_step: int) -> Set[str]:
        """The layers stats step `stats_step` reports: all, or with statsLayerGroups = N > 1 (opt-in)
        group (stats_step / statsEvery) % N, layer i of runStarted.layers being in group i % N."""
        groups = self.config.get("statsLayerGroups", 1)
        if groups == 1:
            return self._names
        group = (stats_step // self.config["statsEvery"]) % groups
        return {name for i, (name, _, _) in enumerate(self.layers) if i % groups == group}

    def _attach_hooks(self, names: Set[str]) -> None:
        # Only the layers this step observes get hooks: the others keep nn.Module's fast call path.
        if not self._hooks:
            observed = [(name, module, adapter) for name, module, adapter in self.layers if name in names]
            self._hooks = [module.register_forward_hook(observer_hook(self, name, adapter)) for name, module, adapter in observed]
            self._hooks += [module.register_forward_pre_hook(observer_pre_hook(self, name, adapter)) for name, module, adapter in observed]
            if self._hooks:
                self._stance = compile_stance.force_eager()

    def _detach_hooks(self) -> None:
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()
        stance, self._stance = self._stance, None
        compile_stance.restore(stance)

    # ------------------------------------------------------------------ emulation and rotation plan

    def _checked_fits(self, config: dict) -> List[dict]:
        """Refuses (ConfigError) a config that cannot run, then how each layer's reduction dims fit its rotations."""
        for kind in GEMM_KINDS:
            check_gemm(config["gemms"][kind], f"config.gemms.{kind}")
        check_layer_groups(config)
        check_wgrad_error_scope(config)
        check_wgrad_error_row_stride(config)
        check_wgrad_error_lag1(config)
        infos = [layer_info(n, m, 0, 0, a) for n, m, a in self.layers]
        return rotation_fits(infos, config["gemms"], self.misfit)

    def _sync_emulations(self, force: bool = False) -> None:
        """Find emulated layers (also those emulated after the bridge attached) and give them the
        run config's GEMMs; with emulate=True, emulate every observed linear layer first."""
        if not force and self._emulation_generation == emulation_module.GENERATION[0]:
            return
        if self._emulate:
            for name, module, _ in self.layers:
                if emulation_module.emulatable(module) and getattr(module, "_mxscope_emulation", None) is None:
                    if self._own_emulation is None:
                        self._own_emulation = emulation_module.Emulation(seed=self.config["seed"] + 7919 * self.rank)
                    emulation_module.emulate_layer(name, module, self._own_emulation)
        self._emulations = {getattr(m, "_mxscope_emulation", None) for _, m, _ in self.layers} - {None}
        self._emulation_generation = emulation_module.GENERATION[0]
        for emulation in self._emulations:
            emulation.gemms = copy.deepcopy(self.config["gemms"])
            emulation.misfit = self.misfit
            emulation.capture = self.capture

    def _name_silent_layers(self, capture: StepCapture) -> None:
        """Says once which observed layers got no stats on a stats step: a module whose weight its
        parent multiplies itself (cross-attention's in-projection, a custom block's) never calls its own forward, so
        its hooks never see a GEMM and it gets no records."""
        silent = [info["name"] for info in self._layer_infos
                  if capture.observes(info["name"]) and not any((info["name"], gemm) in capture.operands for gemm in GEMM_KINDS)
                  and info["name"] not in self._named_silent]
        if silent:
            self._named_silent.update(silent)
            shown = ", ".join(silent[:5]) + (f" and {len(silent) - 5} more" if len(silent) > 5 else "")
            self.log(f"{len(silent)} observed layers got no stats at stats step {self.step}: {shown}. A module whose weight "
                     "another module multiplies itself never runs its own forward, and a "
                     "layer the step does not call has no GEMMs to measure")

    def _name_refused_layers(self) -> None:
        """Says which layers' E_{t−1} the host store refused (wgrad_error.HostErrorStore), as it refuses them."""
        store = self._errors.store
        refused = store.take_refused()
        if refused and self.rank == 0:
            shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
            self.log(f"{len(refused)} layer{'s' if len(refused) > 1 else ''} will report no lag-1 (lag1Cos null) for the rest of this run: {shown}. "
                     f"The first layer refused was because {store.refusal}; {len(store.refused)} of {len(self._layer_infos)} layers refused so far. "
                     "Bridge(lag1_host_bytes=...) sets the budget; layer groups (run_config(stats_layer_groups=N)) need about 1/N as much")

    # ------------------------------------------------------------------ reduction and records

    def _operand_sums(self, capture: StepCapture, layer: str, gemm: str, operand: str):
        kernel = capture.kernel.get((layer, gemm, operand))
        if kernel is not None:
            return kernel
        return capture.operands.get((layer, gemm), (None, {}))[1].get(operand)

    def _step_stats(self, capture: StepCapture, step: int) -> Optional[StepStats]:
        """The step's sums, reduced over ranks, on their way to rank 0's publisher (None elsewhere)."""
        keys = [(info["name"], gemm) for info in self._layer_infos for gemm in GEMM_KINDS
                if all(self._operand_sums(capture, info["name"], gemm, op) is not None for op in GEMM_OPERANDS[gemm])]
        rows = [(layer, gemm, op) for layer, gemm in keys for op in GEMM_OPERANDS[gemm]]
        sums = [self._operand_sums(capture, *row) for row in rows]
        operand_part = stats.operand_vectors(sums)
        if self._on_local_stats is not None:
            self._on_local_stats(step, rows, operand_part.to("cpu", copy=True))
        wgrad_layers, wgrad_vector = self._errors.records_vector([info["name"] for info in self._layer_infos])
        if self.world > 1:
            if wgrad_vector is not None and self._per_rank:  # each rank's whole sums: the all-reduce gives their mean
                wgrad_vector = wgrad_vector / self.world
            operand_part, wgrad_vector = self._sum_over_ranks(operand_part, wgrad_vector)
        if self.rank != 0:
            return None
        precisions = {(layer, gemm): capture.operands[(layer, gemm)][0] if (layer, gemm) in capture.operands else self._declared.get(gemm) or "mxfp4"
                      for layer, gemm in keys}
        return StepStats(self.run_id, step, keys, precisions, set(capture.simulated), set(capture.kernel), operand_part,
                         [(s.format, s.block_size) for s in sums], wgrad_layers, wgrad_vector, self._errors.sketch_size, self._errors.has_prev,
                         self._errors.without_prev)

    def _sum_over_ranks(self, operand_part: torch.Tensor, wgrad_vector: Optional[torch.Tensor]):
        """One all-reduce a stats step: the ranks' operand sums, and their Wgrad error sums and
        sketches: under wgradErrorScope "batch" each rank's part of every chunk (WgradErrors), under
        "rank" each rank's whole sums over world. Like the histograms, the vectors add up element by
        element: every rank's backward must have reached the same layers (a data-parallel model's do)."""
        if wgrad_vector is None:
            torch.distributed.all_reduce(operand_part, group=self.group)
            return operand_part, None
        both = torch.cat([operand_part.reshape(-1).to(wgrad_vector.device), wgrad_vector])
        torch.distributed.all_reduce(both, group=self.group)
        return both[:operand_part.numel()].view(operand_part.shape), both[operand_part.numel():]

    # ------------------------------------------------------------------ publishing

    def _publish(self, record: dict, logged: bool = False) -> None:
        if self.rank != 0:
            return
        if self.server:
            self.server.publish(record)
        elif self._log_pump and not logged:
            self._log_pump.publish(record)

    def _publish_stats(self, step_stats: StepStats) -> None:
        """The step's layerStats, built by the publisher thread (the server's, or the run log's)."""
        if self._publisher:
            self._publisher.publish(step_stats)

    def _write_record(self, record: dict, line: str) -> None:
        # Called by the publisher thread (the server's, or the run log's), in publish order.
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
        if self._closed:
            raise RequestError("internal", "the bridge is closing")
        request = _TrainingThreadRequest(message)
        self._requests.put(request)
        if not request.done.wait(REQUEST_TIMEOUT_S):
            raise RequestError("internal", f"the training script did not take the {kind} request within {REQUEST_TIMEOUT_S:.0f} s"
                               + (": is it waiting in bridge.runs() or wait_for_start()?" if kind == "startRun" else ""))
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
                self._stop_acks.append(request)  # acked once the run's runEnded is out
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

"""What the bridge costs on a GPU, against plain bf16 training in the same process.

    python3 examples/bench_bridge.py                                    # 1.1B Llama, 8x1024 and 8x4096 tokens/step
    python3 examples/bench_bridge.py --tiny --device cpu --shapes 2x64   # smoke test
    python3 examples/bench_bridge.py --model moe --shapes 8x1024          # 4 blocks of Qwen3-30B-A3B's MoE shape

One model (transformers' LlamaForCausalLM with TinyLlama's shape, or with --model moe a
Qwen3MoeForCausalLM of 4 blocks shaped like Qwen3-30B-A3B's: 128 experts, 8 per token; random init), synthetic tokens,
bf16 autocast, AdamW. Every timed step starts and ends on an idle GPU. Blocks of plain steps
alternate with blocks of the measured mode, so clock and thermal drift hit both alike:

- observe: the bridge attached with hooks only (no emulation), statsEvery S. A bridge block is S
  steps, so it holds one stats step, one pre-stats step (E for lag-1) and S-2 steps with nothing to
  do, in a run's order: pre-stats, stats, then the idle ones. What a step leaves running (the stats
  step's records, E's copies) thus lands in the bridge step after it, as in training, and not in
  the first plain step of the next block. The overhead at a larger statsEvery N is derived from the
  same run's per-kind means:
  (t_stats + t_pre + (N-2)·t_off) / (N·t_plain) - 1.
- emulated: every nn.Linear's three GEMMs in emulated MXFP4 (Hadamard block 32), no bridge.

Parameters are float32 (AdamW's master weights) unless --param-dtype bfloat16. transformers' MoE
experts multiply in their parameters' dtype, torch's grouped GEMM not being autocast's: with float32
parameters the plain steps' expert GEMMs run in float32, emulated ones in bf16 as every other GEMM.

Peak memory is torch.cuda.max_memory_allocated over the steps of each kind. The table printed last
names the baseline of every row; --results writes all figures as JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Optional

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mxscope_bridge import Bridge, default_gemms, emulate, gemm_config, run_config  # noqa: E402
from mxscope_bridge.backward_worker import BackwardWorker  # noqa: E402
from llama_mxfp4 import SHAPES, bridge_step_ms, build_model, busy_floor, logits_of, step_kind  # noqa: E402
import trace_gaps  # noqa: E402
from compile_watch import CompileWatch, describe  # noqa: E402

EMULATED = {
    "mxfp4 H32 nearest-even": dict(rotation="hadamard", rounding="nearest-even"),
    "mxfp4 H32 stochastic": dict(rotation="hadamard", rounding="stochastic"),
    "mxfp4 RHT32 nearest-even": dict(rotation="random-hadamard", rounding="nearest-even"),
}
GIB = 2 ** 30
#: Qwen3-30B-A3B's decoder block (hidden 2048, 32 query and 4 KV heads of 128, 128 experts of 768, 8 per token), 4 of its 48 blocks.
MOE_SHAPE = dict(vocab=32000, dim=2048, layers=4, heads=32, kv_heads=4, head_dim=128, experts=128, per_token=8, expert_hidden=768)


def build_moe(shape: dict):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    config = Qwen3MoeConfig(vocab_size=shape["vocab"], hidden_size=shape["dim"], num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                            num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"], num_experts=shape["experts"],
                            num_experts_per_tok=shape["per_token"], moe_intermediate_size=shape["expert_hidden"], decoder_sparse_step=1,
                            mlp_only_layers=[], max_position_embeddings=4096, tie_word_embeddings=False)
    return Qwen3MoeForCausalLM(config), f"transformers Qwen3MoeForCausalLM ({shape['layers']} blocks, {shape['experts']} experts, {shape['per_token']} per token)"


class Trainer:
    """One model and optimizer; `step()` runs one timed training step and returns (ms, peak bytes)."""

    def __init__(self, args, batch: int, seq: int, checkpointing: bool):
        self.device = torch.device(args.device)
        self.backward_ms = None
        torch.manual_seed(1234)
        shape = MOE_SHAPE if args.model == "moe" else SHAPES["tiny" if args.tiny else "1b"]
        build = (lambda: build_moe(shape)) if args.model == "moe" else (lambda: build_model(shape, not args.no_transformers))
        if hasattr(torch, "get_default_device"):  # build on the device: a 1.1B init on the CPU takes a minute
            with self.device:
                self.model, self.kind = build()
        else:
            self.model, self.kind = build()
        self.model.to(self.device)
        if args.param_dtype == "bfloat16":
            # transformers' grouped_mm experts multiply in their parameters' dtype (torch's grouped GEMM is
            # not autocast's): float32 parameters make float32 expert GEMMs under bf16 autocast.
            self.model.to(torch.bfloat16)
            self.kind += ", parameters bf16"
        if checkpointing and hasattr(self.model, "gradient_checkpointing_enable"):
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
        self.vocab, self.batch, self.seq = shape["vocab"], batch, seq
        self.generator = torch.Generator(device="cpu").manual_seed(99)
        self.cuda = self.device.type == "cuda"

    def step(self, bridge=None, bridge_step=None):
        tokens = torch.randint(0, self.vocab, (self.batch, self.seq + 1), generator=self.generator).to(self.device)
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        if bridge is not None:
            bridge.begin_step(bridge_step)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.cuda):
            logits = logits_of(self.model, tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        del logits
        backward_started = time.perf_counter()
        loss.backward()
        # The host's time in backward: a bridge whose work cannot keep up holds up autograd's thread here.
        self.backward_ms = (time.perf_counter() - backward_started) * 1000
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        if bridge is not None:
            bridge.end_step(loss=loss, lr=3e-4, grad_norm=grad_norm)  # tensors: the bridge reads them without a sync
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss.item()
        elapsed = (time.perf_counter() - started) * 1000
        return elapsed, torch.cuda.max_memory_allocated() if self.cuda else 0


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in str(error)


class Samples:
    def __init__(self):
        self.ms, self.peak, self.oom, self.backward_ms = {}, {}, set(), {}
        #: GPU-busy ms of the profiled step of each kind (--profile-dir, CUDA)
        self.busy_ms = {}

    def add(self, kind, ms, peak, backward_ms=None):
        if backward_ms is not None:
            self.backward_ms.setdefault(kind, []).append(backward_ms)
        self.ms.setdefault(kind, []).append(ms)
        self.peak[kind] = max(self.peak.get(kind, 0), peak)

    def mean(self, *kinds):
        values = [v for k in kinds for v in self.ms.get(k, [])]
        return statistics.fmean(values) if values else float("nan")

    def peak_gib(self, *kinds):
        return max((self.peak.get(k, 0) for k in kinds), default=0) / GIB


PROFILE_DIR = None
#: Python garbage-collection time inside timed steps, per step kind (an outlier's usual suspect).
GC_MS = {}
_gc = {"kind": None, "started": 0.0}


def _on_gc(phase, info):
    if phase == "start":
        _gc["started"] = time.perf_counter()
    elif _gc["kind"] is not None:
        GC_MS[_gc["kind"]] = GC_MS.get(_gc["kind"], 0.0) + (time.perf_counter() - _gc["started"]) * 1000


def run_step(trainer, samples, kind, **bridge):
    _gc["kind"] = kind
    if kind in samples.oom:
        return
    profiling = PROFILE_DIR and kind not in samples.ms and kind in ("plain", "stats", "pre", "off")
    STEPS_RUN[kind] = STEPS_RUN.get(kind, 0) + 1
    try:
        if profiling:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as profiler:
                ms, peak = trainer.step(**bridge)
            with open(os.path.join(PROFILE_DIR, f"profile-{trainer.batch}x{trainer.seq}-{kind}.txt"), "w") as f:
                f.write(f"{kind} step {ms:.1f} ms under the profiler\n")
                f.write(profiler.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=50))
                f.write(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50))
            # The timeline too: trace_gaps.py tells from it how long the GPU sat idle, and who launched late.
            trace = os.path.join(PROFILE_DIR, f"trace-{trainer.batch}x{trainer.seq}-{kind}.json")
            profiler.export_chrome_trace(trace)
            if trainer.cuda:
                samples.busy_ms[kind] = trace_gaps.busy_ms(trace)
            samples.ms.setdefault(kind, [])  # a profiled step is not timed
            return
        else:
            ms, peak = trainer.step(**bridge)
    except RuntimeError as error:
        if not _is_oom(error):
            raise
        samples.oom.add(kind)
        trainer.optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        print(f"  {kind}: out of memory", flush=True)
        return
    samples.add(kind, ms, peak, trainer.backward_ms)


HOOK_SECONDS = {}
#: Wall time autograd's thread spent handing work to the backward worker, per step kind.
QUEUE_WAIT_SECONDS = {}
#: Steps run per kind since the warm-up (what the two above are divided by).
STEPS_RUN = {}
#: Whether the bridge block being run is timed (after its warm-up has compiled the kernels).
TIMED = {"now": False}


def per_step(seconds: dict) -> dict:
    """Seconds summed per step kind as ms per step of that kind run since the warm-up (timed, or
    profiled: a profiled step runs the bridge's work too)."""
    return {k: round(v * 1000 / max(1, STEPS_RUN.get(k, 0)), 1) for k, v in seconds.items()}


def _time_hooks():
    """Wall time spent inside the bridge's backward-time work, per step kind (host time: launches
    and Python, on the bridge's backward worker thread beside autograd's, or with
    --no-backward-thread on autograd's; the GPU runs behind it): a layer's (observe._observe) and a
    group of experts' (grouped_observe._measure)."""
    from mxscope_bridge import grouped_observe, observe

    def timing(inner):
        def timed(config, capture, *args, **kwargs):
            started = time.perf_counter()
            try:
                return inner(config, capture, *args, **kwargs)
            finally:
                kind = "stats" if capture.with_stats else "pre"
                HOOK_SECONDS[kind] = HOOK_SECONDS.get(kind, 0.0) + time.perf_counter() - started
        return timed
    observe._observe = timing(observe._observe)
    grouped_observe._measure = timing(grouped_observe._measure)

    submit = BackwardWorker.submit

    def waited(worker, device, work, *args):
        # The hooks' time in submit: almost all of it waiting for room in the worker's queue. The work
        # is a capture's measure (StepCapture.measure).
        started = time.perf_counter()
        try:
            return submit(worker, device, work, *args)
        finally:
            kind = "stats" if work.__self__.with_stats else "pre"
            QUEUE_WAIT_SECONDS[kind] = QUEUE_WAIT_SECONDS.get(kind, 0.0) + time.perf_counter() - started
    BackwardWorker.submit = waited


def _profile_hooks(path, no_backward_thread: bool):
    """cProfile of the bridge's backward-time work (the thread that runs it) on timed stats steps and,
    apart, on timed pre-stats steps, written to `path`."""
    import cProfile
    import pstats
    from mxscope_bridge import grouped_observe, observe
    profilers = {"stats": cProfile.Profile(), "pre-stats": cProfile.Profile()}

    def profiling(inner):
        def profiled(config, capture, *args, **kwargs):
            if not TIMED["now"]:
                return inner(config, capture, *args, **kwargs)
            profiler = profilers["stats" if capture.with_stats else "pre-stats"]
            profiler.enable()
            try:
                return inner(config, capture, *args, **kwargs)
            finally:
                profiler.disable()
        return profiled
    observe._observe = profiling(observe._observe)
    grouped_observe._measure = profiling(grouped_observe._measure)

    def write():
        with open(path, "w") as f:
            if sys.version_info >= (3, 12) and not no_backward_thread:
                # cProfile reports through sys.monitoring since 3.12, which hands it every thread's calls.
                f.write("NOTE: Python 3.12+ cProfile also counts the other threads' calls made while the worker's were profiled "
                        "(autograd's, the publisher's): run with --no-backward-thread for one thread's profile.\n")
            for kind, profiler in profilers.items():
                f.write(f"==== {kind} steps\n")
                stats = pstats.Stats(profiler, stream=f)
                stats.sort_stats("tottime").print_stats(40)
                stats.print_callers(8)  # who pays for the costliest calls
                stats.sort_stats("cumulative").print_stats(40)
    return write


@contextlib.contextmanager
def worker_on(stream: str):
    """The backward worker's kernels on its own stream ("own", the bridge's way) or on the stream
    its hook saw ("trainer"): the event, record_stream and drain's wait then order nothing."""
    if stream not in ("own", "trainer"):
        raise SystemExit(f"--worker-streams: {stream!r} is neither own nor trainer")
    own = BackwardWorker.stream
    if stream == "trainer":
        BackwardWorker.stream = lambda self, device: torch.cuda.current_stream(device)
    try:
        yield
    finally:
        BackwardWorker.stream = own


def after_stats_excess(samples, stats_every: int) -> list:
    """Each block's first idle step (the one after its stats step) minus the plain steps' median."""
    idle, plain = samples.ms.get("off", []), samples.ms.get("plain", [])
    per_block = stats_every - 2
    if per_block < 1 or not idle or not plain:
        return []
    base = statistics.median(plain)
    return [ms - base for ms in idle[::per_block]]


def measure_observe(trainer, args, stats_every, tokens, samples, mode, groups=1, row_stride=1):
    # What MXFP4 with a 32-block Hadamard would do on every GEMM: the stats and the Wgrad error are measured for that.
    gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
    config = run_config(preset="bench", seed=1, tokens_per_step=tokens, stats_every=stats_every, sketch_size=64, gemms=gemms,
                        stats_layer_groups=groups, wgrad_error_row_stride=row_stride)
    # --run-logs keeps each run's log (its step times are what the extension's telemetry cost reads).
    budget = None if args.lag1_host_gib is None else int(args.lag1_host_gib * GIB)
    bridge = Bridge(trainer.model, config, out_dir=args.run_logs or tempfile.mkdtemp(prefix="mxscope-bench-"), port=0, print_listening=False,
                    log=lambda line: print(f"  bridge: {line}", flush=True) if "lag-1" in line else None, handle_exit=False,
                    backward_thread=not args.no_backward_thread, lag1_host_bytes=budget)
    bridge.start_run(name=f"bench {trainer.batch}x{trainer.seq} {mode}")
    k = 0

    def bridge_block(timed, steps=stats_every):
        nonlocal k
        for _ in range(steps):
            kind = step_kind(k, stats_every)
            if timed:
                run_step(trainer, samples, kind, bridge=bridge, bridge_step=k)
            else:
                trainer.step(bridge=bridge, bridge_step=k)
            k += 1

    TIMED["now"] = False
    # Warm-up (compiles kernels, fills caches): every group's stats step, ending where a timed block
    # starts, on a pre-stats step.
    bridge_block(timed=False, steps=stats_every * (groups + 1) - 1)
    HOOK_SECONDS.clear()
    QUEUE_WAIT_SECONDS.clear()
    STEPS_RUN.clear()
    TIMED["now"] = True
    # Each layer group's stats step timed equally often; with --profile-dir one round more, whose first
    # step of each kind is profiled and so not timed (with --rounds 1 those were every capture step).
    for _ in range(-(-args.rounds // groups) * groups + (1 if PROFILE_DIR else 0)):
        for _ in range(stats_every):
            run_step(trainer, samples, "plain")
        bridge_block(timed=True)
    store = bridge._errors.store
    print(f"  lag-1's host buffers at the end: {store.held / GIB:.2f} GiB ({store.spares} spare of them; budget "
          f"{'none' if store.budget is None else f'{store.budget / GIB:.1f} GiB'}, {len(store.refused)} layers refused)", flush=True)
    bridge.end_run()
    bridge.close()
    return bridge.dropped_stats


def observe_label(groups: int, row_stride: int, no_backward_thread: bool, lag1_gib: Optional[float] = None, worker_stream: str = "own") -> str:
    """A table row's mode (and its run's name): every layer and every row, or the opt-in it measures, named."""
    suffix = "" if lag1_gib is None else ", lag-1 off (lag1_host_bytes=0)" if lag1_gib == 0 else f", lag-1 within {lag1_gib:g} GiB"
    suffix += "" if worker_stream == "own" else ", worker on the trainer's stream"
    if groups > 1:
        return f"observe (hooks), opt-in layer groups {groups} (a layer every {groups}·statsEvery){suffix}"
    if row_stride > 1:
        return f"observe (hooks), opt-in Wgrad error from 1 in {row_stride} rows (an estimate){suffix}"
    return ("observe (hooks, no worker thread)" if no_backward_thread else "observe (hooks)") + suffix


def measure_emulated(trainer, args, label, samples):
    gemm = gemm_config("mxfp4", EMULATED[label]["rotation"], 32, EMULATED[label]["rounding"], False)
    emulation = emulate(trainer.model, default_gemms(gemm), seed=1)
    TIMED["now"] = False
    trainer.step()  # warm-up
    TIMED["now"] = True
    for _ in range(args.rounds):
        emulation.enabled = False
        for _ in range(args.emulated_block):
            run_step(trainer, samples, "plain")
        emulation.enabled = True
        for _ in range(args.emulated_block):
            run_step(trainer, samples, label)
    emulation.enabled = False


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="8x1024,8x4096", help="comma-separated BATCHxSEQ")
    parser.add_argument("--checkpointing-from", type=int, default=4096, help="activation checkpointing (both sides) at this seq length and above")
    parser.add_argument("--stats-every", type=int, default=10, help="statsEvery of the measured bridge blocks")
    parser.add_argument("--layer-groups", default="1,4", help="comma-separated statsLayerGroups to measure (1: every layer at every stats step; N > 1: the opt-in layer groups)")
    parser.add_argument("--row-strides", default="4", help="comma-separated opt-in wgradErrorRowStride N > 1 to measure, every layer at every stats step "
                                                          "(the Wgrad error estimated from every N-th row of ∇W)")
    parser.add_argument("--derive", default="100", help="comma-separated larger statsEvery values derived from the per-kind means")
    parser.add_argument("--emulated", default=",".join(EMULATED), help="comma-separated emulated modes (empty: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--emulated-block", type=int, default=3)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--model", default="llama", choices=["llama", "moe"], help="llama: TinyLlama's shape (--tiny: a toy); moe: MOE_SHAPE (transformers)")
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--param-dtype", default="float32", choices=["float32", "bfloat16"],
                        help="the parameters' dtype (and AdamW's); bf16 autocast either way. transformers' MoE experts multiply in it")
    parser.add_argument("--skip-observe", action="store_true")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--results", default=None)
    parser.add_argument("--run-logs", default=None, help="write the observing runs' run logs here (for the extension's telemetry cost of each; default: a temporary folder)")
    parser.add_argument("--profile-dir", default=None, help="write torch.profiler tables and timelines (trace-*.json, for trace_gaps.py) of the first plain, idle, stats and pre-stats step here (those steps are not timed)")
    parser.add_argument("--no-backward-thread", action="store_true",
                        help="the bridge's backward work in the hooks, on autograd's thread (what torch.distributed runs), not on its worker thread")
    parser.add_argument("--lag1-host-gib", type=float, default=None,
                        help="Bridge(lag1_host_bytes) in GiB: host memory for lag-1's E_{t-1} (default: half the host's; 0: lag-1 off, no work on the step before a stats step)")
    parser.add_argument("--worker-streams", default="own",
                        help="comma-separated, each measured in turn for every mode: own (the backward worker's kernels on a stream of its own, "
                             "the default) or trainer (on the trainer's stream, as before 29 Nov 2026): an A/B in one process")
    parser.add_argument("--host-profile", default=None, help="write a cProfile of the bridge's backward-time host work on stats and pre-stats steps here (under Python 3.12+ it counts every thread: with --no-backward-thread, one)")
    args = parser.parse_args()
    global PROFILE_DIR
    PROFILE_DIR = args.profile_dir
    if PROFILE_DIR:
        os.makedirs(PROFILE_DIR, exist_ok=True)
    _time_hooks()
    write_host_profile = _profile_hooks(args.host_profile, args.no_backward_thread) if args.host_profile else None
    import gc
    gc.callbacks.append(_on_gc)
    watching = contextlib.ExitStack()
    compiles = watching.enter_context(CompileWatch(lambda: TIMED["now"]))

    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"device {device_name}, torch {torch.__version__}", flush=True)
    rows, results = [], []
    for shape in args.shapes.split(","):
        batch, seq = (int(v) for v in shape.split("x"))
        tokens = batch * seq
        checkpointing = seq >= args.checkpointing_from
        trainer = Trainer(args, batch, seq, checkpointing)
        samples = Samples()
        run_step(trainer, samples, "warm")
        note = " (activation checkpointing, both sides)" if checkpointing else ""
        print(f"== {batch}x{seq} = {tokens} tokens/step{note}, {trainer.kind}", flush=True)
        dropped = 0
        variants = [] if args.skip_observe else [(int(v), 1) for v in args.layer_groups.split(",") if v] + [(1, int(v)) for v in args.row_strides.split(",") if v and int(v) > 1]
        for (groups, row_stride), worker_stream in [(v, w) for v in variants for w in args.worker_streams.split(",")]:
            samples = Samples()
            mode = observe_label(groups, row_stride, args.no_backward_thread, args.lag1_host_gib, worker_stream)
            with worker_on(worker_stream):
                dropped = measure_observe(trainer, args, args.stats_every, tokens, samples, mode, groups, row_stride)
            plain = samples.mean("plain")
            on = samples.mean("stats", "pre", "off")
            per_kind = {k: samples.mean(k) for k in ("plain", "off", "pre", "stats")}
            rows.append((tokens, args.stats_every, f"{mode}, measured", "plain bf16", plain, on, samples.peak_gib("plain"), samples.peak_gib("stats", "pre", "off"), samples.oom))
            for n in (int(v) for v in args.derive.split(",") if v):
                derived = bridge_step_ms(per_kind, n)
                rows.append((tokens, n, f"{mode}, derived", "plain bf16", plain, derived, samples.peak_gib("plain"), samples.peak_gib("stats", "pre", "off"), samples.oom))
            # Medians per step kind: one garbage collection or stray stall moves a mean of five.
            median = {k: statistics.median(samples.ms[k]) if samples.ms.get(k) else float("nan") for k in ("plain", "off", "pre", "stats")}
            for n in [args.stats_every] + [int(v) for v in args.derive.split(",") if v]:
                derived = bridge_step_ms(median, n)
                rows.append((tokens, n, f"{mode}, per-kind medians", "plain bf16 median", median["plain"], derived,
                             samples.peak_gib("plain"), samples.peak_gib("stats", "pre", "off"), samples.oom))
            host_ms, wait_ms = per_step(HOOK_SECONDS), per_step(QUEUE_WAIT_SECONDS)
            backward_ms = {k: round(statistics.median(v), 1) for k, v in samples.backward_ms.items()}
            results.append({"tokens": tokens, "shape": shape, "checkpointing": checkpointing, "mode": "observe", "statsEvery": args.stats_every, "statsLayerGroups": groups,
                            "wgradErrorRowStride": row_stride,
                            "backwardThread": not args.no_backward_thread,
                            "perKindMs": per_kind, "samples": samples.ms, "peakGiB": {k: v / GIB for k, v in samples.peak.items()},
                            "backwardWorkHostMsPerStep": host_ms, "queueWaitMsPerStep": wait_ms,
                            "backwardHostMsMedian": backward_ms,
                            "droppedStats": dropped, "oom": sorted(samples.oom), "gpuBusyMs": samples.busy_ms, "compiles": compiles.take()})
            print(f"  {describe(results[-1]['compiles'])}", flush=True)
            print(f"  {mode}: per-kind ms " + json.dumps({k: round(v, 1) for k, v in per_kind.items()}), flush=True)
            print("  per-kind median ms " + json.dumps({k: round(statistics.median(samples.ms[k]), 1) for k in per_kind if samples.ms.get(k)}), flush=True)
            # Where a bridge's memory goes: its capture steps' peaks against the plain and idle steps'.
            print("  peak GiB per kind " + json.dumps({k: round(samples.peak_gib(k), 2) for k in samples.peak}), flush=True)
            after = after_stats_excess(samples, args.stats_every)
            if after:  # what a stats step leaves to the step after it: per-kind medians do not show it, means do
                print(f"  the idle step after each stats step, ms over the plain median: {[round(v, 1) for v in after]} (mean {statistics.mean(after):.1f})", flush=True)
            print("  garbage collection ms per kind, all timed steps " + json.dumps({k: round(v, 1) for k, v in GC_MS.items()}), flush=True)
            GC_MS.clear()
            print(f"  host ms of the bridge's backward work per step ({'autograd' if args.no_backward_thread else 'its worker'} thread) " + json.dumps(host_ms), flush=True)
            if wait_ms:
                print("  ms per step autograd's thread waited for room in the worker's queue " + json.dumps(wait_ms), flush=True)
            print("  loss.backward's host ms per kind (medians) " + json.dumps(backward_ms), flush=True)
            if {"plain", "off", "pre", "stats"} <= set(samples.busy_ms):  # the floor no host-side change can go below
                floor = busy_floor(samples.busy_ms, median["plain"], args.stats_every)
                print("  GPU-busy ms of the profiled steps " + json.dumps({k: round(v, 1) for k, v in samples.busy_ms.items()})
                      + f"; the busy time alone at statsEvery {args.stats_every}: {floor * 100:+.1f} % of the plain median", flush=True)
        for label in [m for m in args.emulated.split(",") if m]:
            emulated = Samples()
            measure_emulated(trainer, args, label, emulated)
            compiled = compiles.take()
            rows.append((tokens, "-", label + ", no bridge", "plain bf16", emulated.mean("plain"), emulated.mean(label), emulated.peak_gib("plain"), emulated.peak_gib(label), emulated.oom))
            results.append({"tokens": tokens, "shape": shape, "checkpointing": checkpointing, "mode": label, "samples": emulated.ms,
                            "peakGiB": {k: v / GIB for k, v in emulated.peak.items()}, "oom": sorted(emulated.oom), "compiles": compiled})
            print(f"  {label}: {emulated.mean(label):.1f} ms vs plain {emulated.mean('plain'):.1f} ms; {describe(compiled)}", flush=True)
        del trainer
        if args.device == "cuda":
            torch.cuda.empty_cache()

    print(f"\nbridge cost on {device_name}; baseline = plain bf16 steps in the same process, alternating blocks")
    if args.model == "moe" and args.param_dtype == "float32":
        print("(float32 parameters: the plain steps' expert GEMMs run in float32, transformers' grouped_mm not being autocast's; "
              "--param-dtype bfloat16 gives bf16 ones)")
    print("| tokens/step | statsEvery | mode | baseline | baseline ms | with ms | overhead / ratio | peak GiB baseline → with |")
    print("|---|---|---|---|---|---|---|---|")
    for tokens, every, mode, baseline, plain, with_ms, peak_plain, peak_with, oom in rows:
        cost = f"{with_ms / plain:.2f}×" if "mxfp4" in mode else f"{(with_ms / plain - 1) * 100:+.1f} %"
        oom_note = f" (OOM: {', '.join(sorted(oom))})" if oom else ""
        print(f"| {tokens} | {every} | {mode} | {baseline} | {plain:.1f} | {with_ms:.1f} | {cost} | {peak_plain:.1f} → {peak_with:.1f}{oom_note} |")
    from mxscope_bridge import capture
    if capture.FALLBACKS:
        print(f"bf16 GEMMs with float32 output fell back to float32 operands {len(capture.FALLBACKS)} times, e.g. {sorted(set(capture.FALLBACKS))[:3]}")
    if write_host_profile:
        write_host_profile()
    watching.close()
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"device": device_name, "torch": torch.__version__, "runs": results}, f, indent=1)


if __name__ == "__main__":
    main()

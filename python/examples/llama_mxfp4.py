"""Train a Llama-style model (random init, synthetic tokens) in emulated MXFP4 with the bridge attached.

Measures the bridge's cost by alternating blocks of steps with and without it in the same process
(so clock and thermal drift hit both alike), and the telemetry volume from the run log.

    python3 examples/llama_mxfp4.py --rotation hadamard --steps 200            # one GPU
    torchrun --nproc_per_node=2 examples/llama_mxfp4.py --ddp --check-reduction  # data parallel
    torchrun --nproc_per_node=2 examples/llama_mxfp4.py --fsdp --check-reduction # sharded (FSDP2)
    torchrun --nproc_per_node=2 examples/llama_mxfp4.py --ddp --observe          # bf16 + hooks vs plain bf16
    python3 examples/llama_mxfp4.py --tiny --steps 4 --device cpu                 # smoke test

Uses transformers' LlamaForCausalLM when it is installed, else the small Llama below.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mxscope_bridge import Bridge, default_gemms, emulate, gemm_config, run_config  # noqa: E402
from compile_watch import CompileWatch, describe  # noqa: E402

SHAPES = {
    # TinyLlama-1.1B's shape: 1.10e9 parameters.
    "1b": dict(vocab=32000, dim=2048, layers=22, heads=32, kv_heads=4, hidden=5632),
    "tiny": dict(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, hidden=128),
}


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def rope(x, base=10000.0):
    t, d = x.shape[-2], x.shape[-1]
    freqs = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = torch.arange(t, device=x.device, dtype=torch.float32)[:, None] * freqs
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.self_attn = torch.nn.Module()
        for name, out in (("q_proj", dim), ("k_proj", kv_heads * self.head_dim), ("v_proj", kv_heads * self.head_dim)):
            setattr(self.self_attn, name, torch.nn.Linear(dim, out, bias=False))
        self.self_attn.o_proj = torch.nn.Linear(dim, dim, bias=False)
        self.mlp = torch.nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj = torch.nn.Linear(dim, hidden, bias=False), torch.nn.Linear(dim, hidden, bias=False)
        self.mlp.down_proj = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        a = self.self_attn
        q = rope(a.q_proj(h).view(b, t, self.heads, self.head_dim).transpose(1, 2))
        k = rope(a.k_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2))
        v = a.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        k, v = (z.repeat_interleave(self.heads // self.kv_heads, 1) for z in (k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            o = scores.softmax(-1) @ v
        x = x + a.o_proj(o.transpose(1, 2).reshape(b, t, -1))
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))


class SmallLlama(torch.nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, hidden):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding(vocab, dim)
        self.model.layers = torch.nn.ModuleList([Block(dim, heads, kv_heads, hidden) for _ in range(layers)])
        self.model.norm = RMSNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.model.embed_tokens(tokens)
        for block in self.model.layers:
            x = block(x)
        return self.lm_head(self.model.norm(x))


def build_model(shape: dict, use_transformers: bool):
    if use_transformers:
        try:
            from transformers import LlamaConfig, LlamaForCausalLM
        except ImportError:
            use_transformers = False
    if not use_transformers:
        return SmallLlama(**shape), "hand-written Llama"
    config = LlamaConfig(vocab_size=shape["vocab"], hidden_size=shape["dim"], intermediate_size=shape["hidden"], num_hidden_layers=shape["layers"],
                         num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"], max_position_embeddings=4096, tie_word_embeddings=False)
    return LlamaForCausalLM(config), "transformers LlamaForCausalLM"


def logits_of(model, tokens):
    out = model(tokens)
    return out.logits if hasattr(out, "logits") else out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer toy shape instead of 1.1B")
    parser.add_argument("--rotation", default="hadamard", choices=["none", "hadamard", "random-hadamard"])
    parser.add_argument("--hadamard-block", type=int, default=32)
    parser.add_argument("--rounding", default="nearest-even", choices=["nearest-even", "stochastic"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--block", type=int, default=20, help="steps per on/off block of the overhead measurement")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--profile-steps", default="", help="comma-separated steps to run under torch.profiler (prints the top ops)")
    parser.add_argument("--trace-dir", default=None, help="with --profile-steps: write each profiled step's timeline here (trace-rank{R}-step{N}.json, for trace_gaps.py)")
    parser.add_argument("--time-budget", type=float, default=0, help="stop at the next block boundary after this many seconds (0 = none)")
    parser.add_argument("--stats-every", type=int, default=10)
    parser.add_argument("--stats-layer-groups", type=int, default=1, help="opt-in: each stats step reports one of N layer groups in turn")
    parser.add_argument("--wgrad-error-scope", default="batch", choices=["batch", "rank"],
                        help="opt-in 'rank': each rank's own Wgrad error, no collective in backward (run_config's wgrad_error_scope)")
    parser.add_argument("--wgrad-error-row-stride", type=int, default=1,
                        help="opt-in N > 1: the Wgrad error estimated from every N-th row of grad W (run_config's wgrad_error_row_stride)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="mxscope-runs")
    parser.add_argument("--results", default=None, help="write the measured figures to this JSON file")
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--ddp", action="store_true", help="wrap in DistributedDataParallel (run under torchrun)")
    parser.add_argument("--fsdp", action="store_true", help="shard every decoder layer and the root with FSDP2 fully_shard (run under torchrun)")
    parser.add_argument("--observe", action="store_true", help="no emulation: plain bf16 steps against bf16 steps with the bridge observing")
    parser.add_argument("--check-reduction", action="store_true", help="verify published histograms = sum of the ranks' own")
    args = parser.parse_args()

    rank, world = 0, 1
    distributed = args.ddp or args.fsdp
    if distributed:
        torch.distributed.init_process_group("nccl" if args.device == "cuda" else "gloo")
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if args.device == "cuda" else args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(1234)
    shape = SHAPES["tiny" if args.tiny else "1b"]
    with torch.device(device) if hasattr(torch, "get_default_device") else _no_context():
        model, model_kind = build_model(shape, not args.no_transformers)
    model.to(device)
    params = sum(p.numel() for p in model.parameters())
    gemm = gemm_config("mxfp4", args.rotation, args.hadamard_block, args.rounding, args.rounding == "stochastic")
    gemms = default_gemms(gemm)
    if not args.observe:
        emulate(model, gemms, seed=rank)
    model = data_parallel(model, args, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)

    local_sums = {}

    def on_local_stats(step, keys, vectors):
        local_sums[step] = (keys, vectors)

    config = run_config(preset="llama-1b" if not args.tiny else "llama-tiny", seed=1234, steps=args.steps, tokens_per_step=args.batch * args.seq * world,
                        stats_every=args.stats_every, stats_layer_groups=args.stats_layer_groups,
                        wgrad_error_scope=args.wgrad_error_scope, wgrad_error_row_stride=args.wgrad_error_row_stride, sketch_size=64, data="synthetic-uniform", gemms=gemms,
                        model={**shape, "seqLen": args.seq, "batch": args.batch, "params": params, "impl": model_kind, "world": world},
                        optimizer={"name": "adamw", "lr": args.lr})
    bridge = Bridge(model, config, out_dir=args.out, print_listening=rank == 0, on_local_stats=on_local_stats if args.check_reduction else None)
    bridge.start_run(name=f"{model_kind} · {params / 1e9:.2f}B · {'observing' if args.observe else 'mxfp4'} {args.rotation}")
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    generator = torch.Generator(device="cpu").manual_seed(1000 + rank)
    times = {True: [], False: []}
    profile_steps = set(args.profile_steps.split(","))
    peak = {True: 0.0, False: 0.0}  # GiB, max_memory_allocated over each kind of block
    by_kind = {}
    loop_started = time.perf_counter()
    steps_run = 0
    timing = {"now": False}
    watching = contextlib.ExitStack()
    compiles = watching.enter_context(CompileWatch(lambda: timing["now"]))
    profiled = []
    for step in range(args.steps):
        if args.time_budget and step > 0 and _bridge_block_starts(step, args.block) and _agree_to_stop(time.perf_counter() - loop_started > args.time_budget, distributed):
            break
        with_bridge = _with_bridge(step, args.block)
        timing["now"] = step >= args.warmup and str(step) not in profile_steps
        tokens = torch.randint(0, shape["vocab"], (args.batch, args.seq + 1), generator=generator).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        profiling = contextlib.ExitStack()
        if str(step) in profile_steps:
            profiler = profiling.enter_context(torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]))
        started = time.perf_counter()
        if with_bridge:
            bridge.begin_step(step)
        with autocast:
            logits = logits_of(model, tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        grad_norm = _full(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        if with_bridge:
            bridge.end_step(loss=loss.item(), lr=args.lr, grad_norm=grad_norm.item())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()
        elapsed = time.perf_counter() - started
        if profiling.close() is None and str(step) in profile_steps:
            # Tables and timelines are written after the loop: writing them here, on one rank, made the
            # next step's first collective wait seconds for it on the other (results/h200x2-2026-11-29).
            profiled.append((step, with_bridge, elapsed, profiler))
        steps_run = step + 1
        if device.type == "cuda":
            peak[with_bridge] = max(peak[with_bridge], torch.cuda.max_memory_allocated(device) / 2**30)
            torch.cuda.reset_peak_memory_stats(device)
        if step >= args.warmup and str(step) not in profile_steps:
            times[with_bridge].append(elapsed)
            by_kind.setdefault(step_kind(step, args.stats_every) if with_bridge else "plain", []).append(elapsed)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss_value:.4f} {elapsed * 1000:.0f} ms {'bridge' if with_bridge else 'plain'}", flush=True)
    bridge.end_run()
    watching.close()
    write_profiles(profiled, rank, device, args.trace_dir)
    run_dir = bridge.run_dir
    bridge.close()

    if args.check_reduction and world > 1:
        check_reduction(local_sums, run_dir, rank, world)
    if distributed:
        # Ranks tear the group down after one last meeting: destroying it while a peer still sends
        # hangs now and then (seen with gloo, torch 1.13, in tests/test_distributed.py).
        torch.distributed.barrier()
    if rank != 0:
        torch.distributed.destroy_process_group() if distributed else None
        return
    log_bytes = os.path.getsize(os.path.join(run_dir, "telemetry.ndjson"))
    bridge_steps = sum(1 for s in range(steps_run) if _with_bridge(s, args.block))
    mean = {k: sum(v) / len(v) if v else float("nan") for k, v in times.items()}
    results = {
        "model": model_kind, "params": params, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "rotation": args.rotation, "hadamardBlock": args.hadamard_block, "rounding": args.rounding, "steps": steps_run,
        "tokensPerStep": args.batch * args.seq * world, "statsEvery": args.stats_every, "world": world,
        "parallel": "fsdp" if args.fsdp else "ddp" if args.ddp else "none", "mode": "observe" if args.observe else "emulated", "statsLayerGroups": args.stats_layer_groups,
        "wgradErrorScope": args.wgrad_error_scope, "wgradErrorRowStride": args.wgrad_error_row_stride, "backwardWorker": bridge.backward_worker is not None,
        "stepMsWithBridge": mean[True] * 1000, "stepMsWithout": mean[False] * 1000, "overhead": mean[True] / mean[False] - 1,
        "telemetryBytes": log_bytes, "telemetryBytesPerStep": log_bytes / bridge_steps, "droppedStats": bridge.dropped_stats,
        "timedSteps": {"with": len(times[True]), "without": len(times[False])}, "runDir": run_dir,
        "peakGiBWithBridge": peak[True], "peakGiBWithout": peak[False], "compiles": compiles.take(),
    }
    median = {kind: statistics.median(values) * 1000 for kind, values in by_kind.items()}
    results["perKindMedianMs"] = median
    results["stepMsByKind"] = {kind: [round(v * 1000, 1) for v in values] for kind, values in by_kind.items()}
    if all(kind in median for kind in ("plain", "stats", "pre", "off")):
        # The scatter of a few slow steps does not move the medians as it moves the means.
        results["overheadByPerKindMedians"] = bridge_step_ms(median, args.stats_every) / median["plain"] - 1
    print("RESULTS " + json.dumps(results), flush=True)
    # A few steps of each kind: the median alone hides how far apart they lie.
    print("STEP KINDS " + "; ".join(f"{kind} n={len(values)} median {median[kind]:.1f} ms ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"
                                     for kind, values in sorted(by_kind.items())), flush=True)
    print(f"COMPILES rank 0: {describe(results['compiles'])}", flush=True)
    if args.results:
        with open(args.results, "w") as f:
            json.dump(results, f, indent=2)
    if distributed:
        torch.distributed.destroy_process_group()


def data_parallel(model, args, device):
    """DDP wraps the model; FSDP2 shards each decoder layer and then the root in place, so layer names
    stay as they are. Both come after emulate(), whose patched forwards they then call."""
    if args.ddp:
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    return model


def _full(tensor):
    """A DTensor (FSDP2's gradient norm) as a plain tensor."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


class _no_context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def write_profiles(profiled, rank: int, device: torch.device, trace_dir) -> None:
    """Each profiled step's top ops, and with `trace_dir` its timeline (trace-rank{R}-step{N}.json, for trace_gaps.py)."""
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    for step, with_bridge, elapsed, profiler in profiled:
        print(f"PROFILE rank {rank} step {step} ({'bridge' if with_bridge else 'plain'}) {elapsed * 1000:.0f} ms\n"
              + profiler.key_averages().table(sort_by=sort, row_limit=18, max_name_column_width=40), flush=True)
        if trace_dir:
            os.makedirs(trace_dir, exist_ok=True)
            profiler.export_chrome_trace(os.path.join(trace_dir, f"trace-rank{rank}-step{step}.json"))


def step_kind(step: int, stats_every: int) -> str:
    """What the bridge does at `step`: stats, the step before stats (E for lag-1), or nothing."""
    return "stats" if step % stats_every == 0 else "pre" if (step + 1) % stats_every == 0 else "off"


def bridge_step_ms(per_kind: dict, stats_every: int) -> float:
    """A bridge step's mean time at statsEvery `stats_every`, from each step kind's time: one stats
    step, the step before it and the rest with nothing to do."""
    return (per_kind["stats"] + per_kind["pre"] + (stats_every - 2) * per_kind["off"]) / stats_every


def busy_floor(busy: dict, plain_ms: float, stats_every: int) -> float:
    """What a bridge's GPU work alone adds to a step at `stats_every`, as a fraction of `plain_ms`:
    bridge_step_ms of the profiled steps' GPU-busy ms over the plain one's. Host time cannot take a
    step below it."""
    return (bridge_step_ms(busy, stats_every) - busy["plain"]) / plain_ms


def _with_bridge(step: int, block: int) -> bool:
    """Blocks with the bridge start one step early: with `block` a multiple of statsEvery, each then
    holds the step before each of its stats steps, which computes E for lag-1 and costs too."""
    return ((step + 1) // block) % 2 == 0


def _bridge_block_starts(step: int, block: int) -> bool:
    return (step + 1) % (2 * block) == 0


def _agree_to_stop(mine: bool, distributed: bool) -> bool:
    """Every rank stops at the same step (rank 0's clock decides)."""
    if not distributed:
        return mine
    flag = [mine]
    torch.distributed.broadcast_object_list(flag, src=0)
    return flag[0]


def check_reduction(local_sums, run_dir, rank, world):
    """Gather every rank's local operand vectors; rank 0 checks that the published histograms are their sum."""
    gathered = [None] * world
    torch.distributed.all_gather_object(gathered, {step: (keys, v.tolist()) for step, (keys, v) in local_sums.items()})
    if rank != 0:
        return
    from mxscope_bridge import stats
    published = {}
    with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "layerStats":
                for operand in record["operands"]:
                    published[(record["step"], record["layer"], record["gemm"], operand["operand"])] = operand
    checked = mismatched = 0
    for step, (keys, _) in gathered[0].items():
        for row, key in enumerate(keys):
            summed = [sum(rank_sums[step][1][row][i] for rank_sums in gathered) for i in range(stats.OPERAND_LEN)]
            want = stats.operand_stats(key[2], summed)
            got = published[(step, *key)]
            per_rank_blocks = [stats.operand_stats(key[2], rank_sums[step][1][row])["blocks"] for rank_sums in gathered]
            checked += 1
            if got["histogram"] != want["histogram"] or got["blocks"] != sum(per_rank_blocks):
                mismatched += 1
    example = next(iter(gathered[0].items()))
    step, (keys, _) = example
    key = keys[0]
    print("REDUCTION " + json.dumps({"checkedOperandHistograms": checked, "mismatched": mismatched, "example": {
        "step": step, "key": list(key), "published": published[(step, *key)]["histogram"],
        "perRank": [stats.operand_stats(key[2], g[step][1][0])["histogram"] for g in gathered]}}), flush=True)


if __name__ == "__main__":
    main()

"""How far the opt-in Wgrad error row stride (`run_config(wgrad_error_row_stride=N)`) lands from the
exact Wgrad error: the same training run observed twice from one seed, every row and every N-th row
(observing changes no bit of training: the script checks the losses are equal), then each (stats
step, layer)'s sampled figures against the exact ones.

    python3 examples/row_stride_accuracy.py --strides 4,8 --steps 60              # the default mid-size Llama
    python3 examples/row_stride_accuracy.py --dim 2048 --hidden 5632 --layers 4   # 1.1 B's layer shapes (GPU)

Prints, per stride, the quantiles over (step, layer) of relErr and gradNorm as sampled ÷ exact and of
lag1Cos as sampled − exact.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config  # noqa: E402
from llama_mxfp4 import build_model, logits_of  # noqa: E402


def observed_run(args, stride: int):
    """(losses, {(step, layer): wgradError}) of one observed run with `stride`."""
    torch.manual_seed(args.seed)
    shape = dict(vocab=args.vocab, dim=args.dim, layers=args.layers, heads=args.heads, kv_heads=args.kv_heads, hidden=args.hidden)
    model, _ = build_model(shape, use_transformers=not args.no_transformers)
    model = model.to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    config = run_config(preset="row-stride-accuracy", seed=args.seed, steps=args.steps, tokens_per_step=args.batch * args.seq,
                        stats_every=args.stats_every, sketch_size=64, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)),
                        wgrad_error_row_stride=stride)
    out = tempfile.mkdtemp(prefix="mxscope-row-stride-")
    bridge = Bridge(model, config, out_dir=out, port=0, print_listening=False, handle_exit=False, log=lambda line: None)
    bridge.start_run()
    generator = torch.Generator().manual_seed(args.seed)
    autocast = torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16, enabled=args.device == "cuda")
    losses = []
    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator).to(args.device)
        bridge.begin_step(step)
        with autocast:
            logits = logits_of(model, tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        bridge.end_step(loss=loss.item(), lr=args.lr)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
        records = [json.loads(line) for line in f]
    return losses, {(r["step"], r["layer"]): r["wgradError"] for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad"}


def quantiles(values):
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return f"min {ordered[0]:+.4f}, p10 {pick(0.1):+.4f}, median {pick(0.5):+.4f}, p90 {pick(0.9):+.4f}, max {ordered[-1]:+.4f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strides", default="4,8")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--stats-every", type=int, default=10)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1408)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-transformers", action="store_true")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    exact_losses, exact = observed_run(args, 1)
    print(f"model: dim {args.dim}, hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}; {args.batch} x {args.seq} tokens, "
          f"{args.steps} steps, statsEvery {args.stats_every}; {len(exact)} (stats step, layer) pairs", flush=True)
    for stride in (int(v) for v in args.strides.split(",") if v):
        losses, sampled = observed_run(args, stride)
        if losses != exact_losses:
            raise SystemExit(f"stride {stride}: the run trained differently (losses {losses[:3]}... against {exact_losses[:3]}...): observing changed training")
        if sorted(sampled) != sorted(exact):
            raise SystemExit(f"stride {stride}: other (step, layer) pairs reported than without a stride")
        rel = [sampled[k]["relErr"] / exact[k]["relErr"] for k in exact if exact[k]["relErr"]]
        norm = [sampled[k]["gradNorm"] / exact[k]["gradNorm"] for k in exact if exact[k]["gradNorm"]]
        lag = [sampled[k]["lag1Cos"] - exact[k]["lag1Cos"] for k in exact if exact[k]["lag1Cos"] is not None and sampled[k]["lag1Cos"] is not None]
        print(f"1 in {stride} rows, same losses as every row:")
        print(f"  relErr sampled / exact:   {quantiles(rel)}")
        print(f"  gradNorm sampled / exact: {quantiles(norm)}")
        print(f"  lag1Cos sampled - exact:  {quantiles(lag)}" if lag else "  lag1Cos: none (no stats step after its pre-stats step)", flush=True)


if __name__ == "__main__":
    main()

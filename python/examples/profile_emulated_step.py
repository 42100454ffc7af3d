"""Where an emulated step's GPU time goes against a plain one's (torch.profiler kernel tables).

    python3 examples/profile_emulated_step.py --model moe --param-dtype bfloat16 --out DIR

Builds bench_bridge.py's model and trainer, warms up, then profiles one plain step and one emulated
MXFP4 H32 nearest-even step, and writes each step's kernel table (CUDA time, top 40) to DIR."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_bridge import Trainer  # noqa: E402
from mxscope_bridge import default_gemms, emulate, gemm_config  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="moe", choices=["llama", "moe"])
    parser.add_argument("--param-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--shape", default="8x1024")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    batch, seq = (int(v) for v in args.shape.split("x"))
    os.makedirs(args.out, exist_ok=True)
    trainer_args = argparse.Namespace(device="cuda", model=args.model, tiny=False, no_transformers=False, param_dtype=args.param_dtype)
    trainer = Trainer(trainer_args, batch, seq, checkpointing=False)
    emulation = emulate(trainer.model, default_gemms(gemm_config("mxfp4", "hadamard", 32)), seed=1)
    for enabled in (False, True):
        emulation.enabled = enabled
        for _ in range(3):
            trainer.step()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as profiler:
            ms, _ = trainer.step()
        name = "emulated" if enabled else "plain"
        table = profiler.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90)
        with open(os.path.join(args.out, f"profile-{args.model}-{name}.txt"), "w") as f:
            f.write(f"{trainer.kind}, {batch}x{seq}, {name} step {ms:.1f} ms under the profiler\n{table}\n")
        print(f"{name}: {ms:.1f} ms under the profiler", flush=True)
        print(table[:6000], flush=True)


if __name__ == "__main__":
    main()

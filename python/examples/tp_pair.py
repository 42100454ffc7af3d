"""What the bridge reports for tensor-parallel shards (issue 17): a column-parallel Linear followed by a
row-parallel one (torch.distributed.tensor.parallel), observed with MXFP4 H32 on every GEMM.

    python3 examples/tp_pair.py --out single.ndjson                          # one GPU, unsharded
    torchrun --nproc_per_node=2 examples/tp_pair.py --out tp.ndjson          # two ranks, one shard each

Both runs build the same weights and inputs from the same seeds and write rank 0's run log to --out,
so the two logs can be compared record by record (python3 examples/tp_compare.py single.ndjson tp.ndjson).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config  # noqa: E402


class Pair(torch.nn.Module):
    """An MLP's up and down projections: the shape tensor parallelism splits column- then row-wise."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def observe_pair(out: str, *, dim: int, hidden: int, tokens: int, steps: int, device: str, sharded: bool) -> str:
    """Trains the pair for `steps` steps with the bridge observing (sharded: over the initialized
    process group, one shard per rank) and copies rank 0's run log to `out`; returns the run's status."""
    rank = torch.distributed.get_rank() if sharded else 0
    torch.manual_seed(0)
    model = Pair(dim, hidden).to(device)
    if sharded:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh(device, (torch.distributed.get_world_size(),))
        parallelize_module(model, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})

    gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
    config = run_config(preset="tp-pair", seed=1, steps=steps, tokens_per_step=tokens, stats_every=1, sketch_size=64, gemms=gemms,
                        model={"dim": dim, "hidden": hidden, "sharded": sharded})
    out_dir = tempfile.mkdtemp(prefix="mxscope-tp-")
    # Every rank observes the whole (gathered) layer, so the ranks must not add their stats up: the
    # bridge's reduction group is the data-parallel one, here each rank on its own.
    group = None
    if sharded:
        group = [torch.distributed.new_group([r]) for r in range(torch.distributed.get_world_size())][rank]
    bridge = Bridge(model, config, out_dir=out_dir, serve=False, print_listening=False, process_group=group, handle_exit=False)
    bridge.start_run(name="tp pair" if sharded else "unsharded pair")
    status = "completed"
    try:
        for step in range(steps):
            torch.manual_seed(100 + step)
            x = torch.randn(tokens, dim, device=device)
            bridge.begin_step(step)
            loss = model(x).float().pow(2).mean()
            loss.backward()
            bridge.end_step(loss=loss.item(), lr=0.0, grad_norm=0.0)
            model.zero_grad(set_to_none=True)
    except Exception:  # the finding is what fails, so it is printed and the log kept
        status = "failed"
        print(f"rank {rank}: FAILED\n" + traceback.format_exc(), flush=True)
    bridge.end_run(status)
    run_dir = bridge.run_dir
    bridge.close()
    if rank == 0:
        shutil.copyfile(os.path.join(run_dir, "telemetry.ndjson"), out)
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="where rank 0 copies its run log (telemetry.ndjson)")
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    sharded = "RANK" in os.environ
    if sharded:
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: gloo ranks (tests/test_tensor_parallel.py)
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    status = observe_pair(args.out, dim=args.dim, hidden=args.hidden, tokens=args.tokens, steps=args.steps, device=device, sharded=sharded)
    if not sharded or torch.distributed.get_rank() == 0:
        print(f"rank 0: {status}, log copied to {args.out}", flush=True)
    if sharded:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

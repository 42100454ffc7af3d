"""All-reduce against reduce-scatter of float32 buffers the size of the bridge's Wgrad chunks, ranks
synchronized before each timed batch (no skew): what the wire costs by itself.

    torchrun --nproc_per_node=2 examples/collective_bench.py
"""
import time

import torch
import torch.distributed as dist


def timed_ms(op, repeats: int = 10) -> float:
    for _ in range(3):
        op()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        op()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / repeats * 1000


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    for megabytes in (4, 46, 184):
        x = torch.randn(megabytes * 2**20 // 4, device="cuda")
        part = torch.empty(x.numel() // world, device="cuda")
        for name, op in (("all_reduce", lambda: dist.all_reduce(x)), ("reduce_scatter", lambda: dist.reduce_scatter_tensor(part, x))):
            ms = timed_ms(op)
            if rank == 0:
                print(f"{name:15s} {megabytes:4d} MB: {ms:7.3f} ms, {megabytes * 2**20 / ms / 1e6:6.1f} GB/s (buffer / time)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Throughput of the fused MXFP4 kernels against the torch path, on one large operand (GPU only).

    python3 examples/bench_kernels.py
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from mxscope_bridge import mx_ops, mxfp4_triton, wgrad_error  # noqa: E402
from mxscope_bridge.draws import Draws, operand_key  # noqa: E402
from mxscope_bridge.rotation import make_rotation  # noqa: E402


def timed(fn, repeat=10):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeat


def host_overhead(x, draws):
    """Host time per call (what a launch-bound training thread pays), on a small operand."""
    import time
    from mxscope_bridge import capture
    small = x[:256, :512]
    gemm = {"precision": "mxfp4", "rotation": "hadamard", "hadamardBlock": 32, "rounding": "nearest-even", "srPrescale": False}
    r = make_rotation("hadamard", 32, 512, x.device, draws)
    row = mx_ops.stats_row(x.device)
    a16, b16 = small.contiguous(), x[:512, :256].contiguous()
    vector = torch.zeros(5 + 128, dtype=torch.float64, device="cuda")
    f1, f2 = a16.float(), a16.float()
    cases = {
        "quantize_operand (values)": lambda: mx_ops.quantize_operand(small, gemm, r, draws, "h", torch.bfloat16),
        "quantize_operand (stats into a row)": lambda: mx_ops.quantize_operand(small, gemm, r, draws, "h", None, True, row),
        "stats_row (zeros)": lambda: mx_ops.stats_row(x.device),
        "mm_float32": lambda: capture.mm_float32(a16, b16, torch.bfloat16),
        "add_error_sums": lambda: wgrad_error.add_error_sums(vector, f1, f2, None, None, 5, 69),
        "torch add (reference launch)": lambda: a16 + 1,
    }
    for name, fn in cases.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(300):
            fn()
        host = (time.perf_counter() - started) / 300 * 1e6
        torch.cuda.synchronize()
        print(f"host µs per call, {name}: {host:.1f}")


QUICK = int(os.environ.get("BENCH_KERNEL_MODES", "4"))


def main():
    tokens, features = 8192, 5632
    x = torch.randn(tokens, features, device="cuda", dtype=torch.bfloat16)
    draws = Draws(0, operand_key(0, "bench", x))  # stochastic rounding's and random signs' key
    copy_ms = timed(lambda: x.clone())
    print(f"operand {tokens}x{features} bf16; a clone (read + write) takes {copy_ms:.3f} ms")
    print("| mode | axis | output | torch path ms | triton ms | triton GB/s (bf16 in + out) |")
    print("|---|---|---|---|---|---|")
    for rotation, rounding in (("none", "nearest-even"), ("hadamard", "nearest-even"), ("hadamard", "stochastic"), ("random-hadamard", "nearest-even"))[:QUICK]:
        gemm = {"precision": "mxfp4", "rotation": rotation, "hadamardBlock": 32, "rounding": rounding, "srPrescale": False}
        for axis, operand in (("last", x), ("first", x.t())):
            for write, with_stats in ((True, False), (False, True), (True, True)):
                def run(force_torch=False):
                    r = make_rotation(rotation, 32, operand.shape[1], x.device, draws)
                    if force_torch:
                        saved = mxfp4_triton.available
                        mxfp4_triton.available = lambda _: False
                    try:
                        mx_ops.quantize_operand(operand, gemm, r, draws, "bench", torch.bfloat16 if write else None, with_stats)
                    finally:
                        if force_torch:
                            mxfp4_triton.available = saved
                torch_ms = timed(lambda: run(True), repeat=2)
                triton_ms = timed(run)
                moved = x.numel() * 2 * (2 if write else 1)
                label = "values" if write and not with_stats else "stats" if not write else "values+stats"
                print(f"| {rotation} {rounding} | {axis} | {label} | {torch_ms:.2f} | {triton_ms:.3f} | {moved / triton_ms / 1e6:.0f} |", flush=True)
    print("| stats launch (elements, warps, programs per SM) | hadamard stats, last axis ms | first axis ms | hadamard values+stats, first axis ms |")
    print("|---|---|---|---|")
    gemm = {"precision": "mxfp4", "rotation": "hadamard", "hadamardBlock": 32, "rounding": "nearest-even", "srPrescale": False}
    r = make_rotation("hadamard", 32, x.shape[1], x.device, draws)
    rt = make_rotation("hadamard", 32, x.shape[0], x.device, draws)
    shipped = dict(mxfp4_triton.LAUNCH)
    for launch in sorted({shipped["stats", True], shipped["stats", False], mxfp4_triton.Launch(2048, 4, 8), mxfp4_triton.Launch(1024, 2, 16),
                          mxfp4_triton.Launch(2048, 8, 8), mxfp4_triton.Launch(4096, 4, 8)}):
        mxfp4_triton.LAUNCH["stats", True] = mxfp4_triton.LAUNCH["stats", False] = launch
        last = timed(lambda: mx_ops.quantize_operand(x, gemm, r, draws, "b", None, True))
        first = timed(lambda: mx_ops.quantize_operand(x.t(), gemm, rt, draws, "b", None, True))
        both = timed(lambda: mx_ops.quantize_operand(x.t(), gemm, rt, draws, "b", torch.bfloat16, True, out_row_major=True))
        print(f"| {tuple(launch)} | {last:.3f} | {first:.3f} | {both:.3f} |", flush=True)
    mxfp4_triton.LAUNCH.update(shipped)
    chunk = x[:, :2048].t()  # a ∇Yᵀ chunk of an observed Wgrad: the quantized values and the exact product's row-major copy
    apart = timed(lambda: (mx_ops.quantize_operand(chunk, gemm, rt, draws, "b", torch.bfloat16, out_row_major=True), chunk.contiguous()))
    fused = timed(lambda: mx_ops.quantize_operand_and_copy(chunk, gemm, rt, draws, "b", torch.bfloat16))
    with_stats = timed(lambda: mx_ops.quantize_operand_and_copy(chunk, gemm, rt, draws, "b", torch.bfloat16, True))
    print(f"∇Yᵀ chunk {tuple(chunk.shape)}: values then .contiguous() {apart:.3f} ms, values and copy in one pass {fused:.3f} ms, "
          f"with stats (a stats step's) {with_stats:.3f} ms")
    xs = x[:, :2048]
    ms_view = timed(lambda: torch.mm(chunk, xs, out_dtype=torch.float32))
    ms_copy = timed(lambda: torch.mm(chunk.contiguous(), xs, out_dtype=torch.float32))
    same = torch.equal(torch.mm(chunk, xs, out_dtype=torch.float32), torch.mm(chunk.contiguous(), xs, out_dtype=torch.float32))
    print(f"float32-output mm of a transposed view: {ms_view:.3f} ms; of its contiguous copy (copy included): {ms_copy:.3f} ms; equal {same}")
    a, b, c = (torch.randn(5632, 2048, device="cuda") for _ in range(3))
    vector = torch.zeros(5 + 128, dtype=torch.float64, device="cuda")
    sketch = torch.arange(0, a.numel(), a.numel() // 64, device="cuda")[:64]
    ms = timed(lambda: wgrad_error.add_error_sums(vector, a, b, c, sketch, 5, 69))
    print(f"error sums over 3 x {a.numel()} float32: {ms:.3f} ms, {3 * a.numel() * 4 / ms / 1e6:.0f} GB/s")
    host_overhead(x, draws)
    host = torch.empty(a.shape, pin_memory=True)
    d2h = timed(lambda: host.copy_(a, non_blocking=True))
    h2d = timed(lambda: a.copy_(host, non_blocking=True))
    print(f"pinned copies of {a.numel() * 4 / 2**20:.0f} MiB: device->host {a.numel() * 4 / d2h / 1e6:.1f} GB/s, host->device {a.numel() * 4 / h2d / 1e6:.1f} GB/s")


if __name__ == "__main__":
    main()

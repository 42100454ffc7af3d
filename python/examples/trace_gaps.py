"""Where a profiled step left the GPU idle: reads a torch.profiler chrome trace (bench_bridge.py
--profile-dir writes them) and prints the step's GPU-busy time (the union of kernels on every stream;
copies apart), kernel time by stream and by kernel name, the idle gaps between kernels, and the largest gaps with the kernel that ended each
and the thread whose launch of the next one came late.

    python3 examples/trace_gaps.py results/.../trace-8x1024-stats.json [--top 15] [--min-us 20]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def union(intervals):
    """Total length of a union of (start, end) intervals, and the merged intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return sum(end - start for start, end in merged), merged


def summarize(events):
    """The step's kernel span, kernel-busy time, copy time, kernel time by stream, and the gaps between
    kernels as (µs, ended at, the next kernel's name, the name of the thread that launched it), largest first."""
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    if not kernels:
        raise ValueError("no kernel events: was the trace recorded with ProfilerActivity.CUDA?")
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset") and "dur" in e]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    threads = {e["tid"]: e["args"].get("name") for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    start = min(e["ts"] for e in kernels)
    end = max(e["ts"] + e["dur"] for e in kernels)
    busy, merged = union((e["ts"], e["ts"] + e["dur"]) for e in kernels)
    by_stream, by_name = defaultdict(float), defaultdict(float)
    for e in kernels:
        by_stream[e["tid"]] += e["dur"]
        by_name[e["name"][:60]] += e["dur"]
    # A merged interval starts where one of its kernels does: that kernel came after the gap.
    starting_at = {}
    for e in kernels:
        starting_at.setdefault(e["ts"], e)
    gaps = []
    for (_, a_end), (b_start, _) in zip(merged, merged[1:]):
        nxt = starting_at[b_start]
        launch = launches.get(nxt["args"].get("correlation"))
        who = (threads.get(launch["tid"]) or f"thread {launch['tid']}") if launch else "unknown"
        gaps.append((b_start - a_end, a_end - start, nxt["name"], who))
    return {"span_us": end - start, "busy_us": busy, "copies_us": union((e["ts"], e["ts"] + e["dur"]) for e in copies)[0],
            "by_stream_us": dict(by_stream), "by_name_us": dict(by_name), "gaps": sorted(gaps, key=lambda g: -g[0])}


def busy_ms(path: str) -> float:
    """The GPU-busy ms of the profiled step in the chrome trace at `path`."""
    with open(path) as f:
        return summarize(json.load(f)["traceEvents"])["busy_us"] / 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--min-us", type=float, default=20.0, help="gaps shorter than this are counted but not listed")
    args = parser.parse_args()
    with open(args.trace) as f:
        s = summarize(json.load(f)["traceEvents"])
    print(f"{args.trace}: first kernel to last {s['span_us'] / 1000:.1f} ms; kernels busy {s['busy_us'] / 1000:.1f} ms "
          f"(idle {(s['span_us'] - s['busy_us']) / 1000:.1f} ms); copies {s['copies_us'] / 1000:.1f} ms on their engines")
    print("kernel ms by stream: " + ", ".join(f"{tid}: {us / 1000:.1f}" for tid, us in sorted(s["by_stream_us"].items(), key=lambda kv: -kv[1])))
    print("kernel ms by name: " + ", ".join(f"{name}: {us / 1000:.1f}" for name, us in sorted(s["by_name_us"].items(), key=lambda kv: -kv[1])[:args.top]))
    listed = [g for g in s["gaps"] if g[0] >= args.min_us]
    print(f"{len(s['gaps'])} gaps, {sum(g[0] for g in s['gaps']) / 1000:.1f} ms; {len(listed)} of ≥ {args.min_us:g} µs: {sum(g[0] for g in listed) / 1000:.1f} ms")
    by_thread = defaultdict(float)
    for gap, _, _, who in listed:
        by_thread[who] += gap
    print("listed gap ms by the thread that launched the next kernel: " + ", ".join(f"{t}: {us / 1000:.1f}" for t, us in sorted(by_thread.items(), key=lambda kv: -kv[1])))
    for gap, at, name, who in listed[:args.top]:
        print(f"  {gap / 1000:7.2f} ms at +{at / 1000:7.1f} ms, next {name[:70]} (launched by {who})")


if __name__ == "__main__":
    main()

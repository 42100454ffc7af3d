"""spread_rows against pad_sequence (grouped_observe's slots) and index_copy_ (grouped_emulation's spread):
host µs a call with the GPU kept busy (launches queue without waiting), GPU ms by events, and equality.
Ran at ad779a7, whose mxscope_bridge/spread_rows.py was reverted after it: check that commit out to run it again."""
import os, random, sys, time
import torch
from torch.nn.utils.rnn import pad_sequence
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
from mxscope_bridge.spread_rows import spread_rows
from mxscope_bridge import grouped_emulation
from mxscope_bridge.rotation import padded_length
dev = "cuda"
random.seed(0)
big = torch.randn(8192, 8192, device=dev)
def busy():
    for _ in range(30): big @ big  # ~30 x 1.1 TFLOP... keeps the GPU ahead of the host
def host_us(fn, n=40):
    fn(); torch.cuda.synchronize(); busy()
    t = time.perf_counter()
    for _ in range(n): fn()
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize(); return h
def gpu_ms(fn, n=50):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn(); torch.cuda.synchronize(); busy(); s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize(); return s.elapsed_time(e) / n
for G, n in ((10, 2048), (10, 768), (40, 2048)):
    counts = [random.randint(0, 900) for _ in range(G)]
    rows = torch.randn(sum(counts), n, device=dev).to(torch.bfloat16)
    rows[::7] = -0.0
    slot = max(padded_length(c, 32) for c in counts)
    def old_slots():
        filler = rows.new_zeros(1, n).expand(slot, -1)
        return pad_sequence([*rows.split(counts), filler], batch_first=True)[:-1].reshape(-1, n)
    new_slots = lambda: spread_rows([rows], counts, [e * slot for e in range(G)], G * slot)[0]
    same = torch.equal(old_slots().view(torch.int16), new_slots().view(torch.int16))
    print(f"slots G={G} n={n}: pad_sequence host {host_us(old_slots):.1f} us gpu {gpu_ms(old_slots):.4f} ms | spread_rows host {host_us(new_slots):.1f} us gpu {gpu_ms(new_slots):.4f} ms | bits equal {same}", flush=True)
    padded = [padded_length(c, 32) for c in counts]
    starts = [sum(padded[:e]) for e in range(G)]
    old_spread = lambda: grouped_emulation.spread_experts((rows, rows), counts, 32)[0]
    new_spread = lambda: spread_rows((rows, rows), counts, starts, sum(padded))
    same = all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(old_spread(), new_spread()))
    print(f"spread G={G} n={n} (two tensors): index_copy host {host_us(old_spread):.1f} us gpu {gpu_ms(old_spread):.4f} ms | spread_rows host {host_us(new_spread):.1f} us gpu {gpu_ms(new_spread):.4f} ms | bits equal {same}", flush=True)

# fp32-output products of a transposed bf16 view against its contiguous copy, on the Wgrad shapes of the bench.
import sys, torch
sys.path.insert(0, 'python')
def timed(fn, repeat=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(repeat): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / repeat
T = 8192
for out, inn in ((256, 2048), (2048, 2048), (5632, 2048), (2048, 5632), (8000, 2048)):
    dy = torch.randn(T, out, device='cuda', dtype=torch.bfloat16)
    x = torch.randn(T, inn, device='cuda', dtype=torch.bfloat16)
    a = dy.t()
    copy = a.contiguous()
    view_ms = timed(lambda: torch.mm(a, x, out_dtype=torch.float32))
    cont_ms = timed(lambda: torch.mm(copy, x, out_dtype=torch.float32))
    copy_ms = timed(lambda: a.contiguous())
    eq = torch.equal(torch.mm(a, x, out_dtype=torch.float32), torch.mm(copy, x, out_dtype=torch.float32))
    ref = torch.mm(a.double(), x.double())
    err_v = ((torch.mm(a, x, out_dtype=torch.float32).double() - ref).abs().max() / ref.abs().max()).item()
    err_c = ((torch.mm(copy, x, out_dtype=torch.float32).double() - ref).abs().max() / ref.abs().max()).item()
    # a column chunk of dY (rows p0:p1 of dYᵀ), as observed_wgrad takes them
    part = dy[:, : out // 2].t()
    part_ms = timed(lambda: torch.mm(part, x, out_dtype=torch.float32))
    part_c = part.contiguous()
    partc_ms = timed(lambda: torch.mm(part_c, x, out_dtype=torch.float32))
    print(f"MMVIEW {out}x{inn} K={T}: view {view_ms:.3f} ms, contiguous {cont_ms:.3f} ms (+ its copy {copy_ms:.3f}), bit-equal {eq}, "
          f"max rel err view {err_v:.2e} copy {err_c:.2e}; half-row chunk view {part_ms:.3f} contiguous {partc_ms:.3f}", flush=True)

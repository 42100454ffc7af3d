# Host cost of the calls a backward-worker item makes, one at a time on an idle GPU (µs per call).
import os, sys, time, torch
sys.path.insert(0, os.path.join(os.getcwd()))
from mxscope_bridge import wgrad_error, mx_ops, mxfp4_triton
from mxscope_bridge.config import gemm_config
dev = torch.device("cuda")
a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16); b = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
f32 = torch.randn(256, 256, device=dev)
host = torch.empty(256, 256, pin_memory=True)
vec = torch.zeros(133, dtype=torch.float64, device=dev)
side = torch.cuda.Stream()
row = torch.zeros(mxfp4_triton.STATS_LEN, dtype=torch.float64, device=dev)
g = gemm_config("mxfp4", "hadamard", 32)
from mxscope_bridge.rotation import make_rotation
r = make_rotation("hadamard", 32, 256, dev, None, "pad")
def t(name, fn, n=2000):
    for _ in range(50): fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n): fn()
    e = time.perf_counter()
    torch.cuda.synchronize()
    print(f"HOST {name:55s} {1e6*(e-s)/n:7.1f} us", flush=True)
cur = torch.cuda.current_stream()
def ctx():
    with torch.cuda.stream(side): pass
def fetch():
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        x = torch.empty(256, 256, device=dev); x.copy_(host, non_blocking=True); ev = torch.cuda.Event(); ev.record(side)
    cur.wait_event(ev)
t("torch.mm bf16", lambda: torch.mm(a, b))
t("torch.mm bf16 out_dtype=float32", lambda: torch.mm(a, b, out_dtype=torch.float32))
t("torch.mm float32 (tf32 setting as is)", lambda: torch.mm(f32, f32))
t("torch.matmul bf16", lambda: a @ b)
t("torch.empty 256x256", lambda: torch.empty(256, 256, device=dev))
t("torch.zeros 133 float64", lambda: torch.zeros(133, dtype=torch.float64, device=dev))
t("tensor.t()", lambda: a.t())
t("row[:3], row[3:5], row[5:]", lambda: (row[:3], row[3:5], row[5:]))
t("torch.cuda.current_stream(dev)", lambda: torch.cuda.current_stream(dev))
t("with torch.cuda.stream(side)", ctx)
t("side.wait_stream(cur)", lambda: side.wait_stream(cur))
t("torch.cuda.Event() + record", lambda: torch.cuda.Event().record(cur))
t("copy_ pinned->dev non_blocking 256KB", lambda: f32.copy_(host, non_blocking=True))
t("HostErrorStore-like fetch (empty, wait, ctx, copy, event)", fetch)
t("add_error_sums (Triton, relaunched)", lambda: wgrad_error.add_error_sums(vec, f32, f32, None, None, 5, 69))
t("mx_ops.quantize_operand stats only (gluon)", lambda: mx_ops.quantize_operand(a, g, r, None, "x", with_stats=True, row=row))
t("mx_ops.quantize_operand values bf16", lambda: mx_ops.quantize_operand(a, g, r, None, "x", torch.bfloat16))
t("mx_ops.quantize_operand_and_copy values+stats (a.t())", lambda: mx_ops.quantize_operand_and_copy(a.t(), g, r, None, "x", torch.bfloat16, True, row))
t("torch.cat 2 x 256x256", lambda: torch.cat([f32, f32]))

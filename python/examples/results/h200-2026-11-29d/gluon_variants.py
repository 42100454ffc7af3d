"""Variants of mxfp4_gluon's stats kernel: time, registers, and agreement with the shipped one."""
import importlib, os, sys, re
import torch
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
from mxscope_bridge import mxfp4_gluon, mxfp4_triton, mx_ops
from mxscope_bridge.rotation import make_rotation, hadamard_norm

SRC = open("python/mxscope_bridge/mxfp4_gluon.py").read()
OLD_SUMS = """            signal += gl.sum((source * source).to(gl.float64), axis=1)
            noise += gl.sum((diff * diff).to(gl.float64), axis=1)"""
assert OLD_SUMS in SRC
VARIANTS = {
    "v0": SRC,
    "f32sums": SRC.replace(OLD_SUMS, """            signal += gl.sum(source * source, axis=1).to(gl.float64)
            noise += gl.sum(diff * diff, axis=1).to(gl.float64)"""),
}
mods = {}
for name, text in VARIANTS.items():
    path = f"python/mxscope_bridge/_var_{name}.py"
    open(path, "w").write(text)
    mods[name] = importlib.import_module(f"mxscope_bridge._var_{name}")

def timed(fn, repeat=20):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(repeat): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / repeat

torch.manual_seed(0)
sm = torch.cuda.get_device_properties(0).multi_processor_count
base = torch.randn(8192, 5632, device="cuda")
base *= torch.exp2(torch.randint(-6, 6, (8192, 1), device="cuda").float())
x = base.to(torch.bfloat16)
cases = []
for label, op in (("8192x5632 along K", x), ("8192x2048 along K", x[:, :2048].contiguous()), ("(2048x8192) along tokens, values+copy", x[:, :2048].t()),
                  ("(5632x8192) along tokens, values+copy", x.t())):
    cases.append((label, op))

def run(mod, op, warps, psm, with_values):
    mod.WARPS, mod.PROGRAMS_PER_SM = warps, psm
    rows, k = op.shape
    r = make_rotation("hadamard", 32, k, op.device)
    signs = r.signs if r is not None else None
    stats = torch.zeros(mxfp4_triton.STATS_LEN, dtype=torch.float64, device="cuda")
    out = copy = None
    if with_values:
        out = torch.empty((rows, k), dtype=torch.bfloat16, device="cuda")
        copy = torch.empty((rows, k), dtype=op.dtype, device="cuda")
    f = lambda: mod.launch(op, signs, 32, hadamard_norm(32), False, None, 0, 0, out, stats, copy, sm)
    return f, stats, out

for label, op in cases:
    with_values = "values" in label
    ref_f, ref_stats, ref_out = run(mods["v0"], op, 2, 16, with_values)
    ref_stats.zero_(); ref_f()
    ref = ref_stats.clone()
    for name, mod in mods.items():
        for warps, psm in ((2, 16), (1, 32), (4, 8), (2, 8), (2, 32), (8, 4)):
            f, stats, out = run(mod, op, warps, psm, with_values)
            ms = timed(f)
            stats.zero_(); f(); torch.cuda.synchronize()
            same_counts = torch.equal(stats[:3], ref[:3]) and torch.equal(stats[5:], ref[5:])
            rel = ((stats[3:5] - ref[3:5]).abs() / ref[3:5].abs()).max().item()
            same_vals = (not with_values) or torch.equal(out.view(torch.int16), ref_out.view(torch.int16))
            kern = list(mod._launch_stats._kernels.values())
            regs = sorted({(getattr(k, "n_regs", None), getattr(k, "n_spills", None)) for k in kern})
            print(f"{label:42s} {name:8s} warps {warps} psm {psm:2d}: {ms:.4f} ms  counts+hist equal {same_counts}  energies rel {rel:.1e}  values equal {same_vals}  regs/spills {regs}", flush=True)

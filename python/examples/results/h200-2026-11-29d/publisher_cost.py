import sys, os, time, json, cProfile, pstats
sys.path.insert(0, os.getcwd())
import torch
from mxscope_bridge import mxfp4_triton, mxfp4, stats
from mxscope_bridge.step_stats import StepStats
from mxscope_bridge.runlog import compact
from mxscope_bridge.wsconnection import text_frame
from mxscope_bridge.link import telemetry_frame
MOE = "--moe" in sys.argv
layers = [f"model.layers.{i}.mlp.experts.{e}.{n}" for i in range(4) for e in range(128) for n in ("gate_up", "down")] if MOE else [f"model.layers.{i}.{n}" for i in range(22) for n in ("self_attn.q_proj","self_attn.k_proj","self_attn.v_proj","self_attn.o_proj","mlp.gate_proj","mlp.up_proj","mlp.down_proj")] + ["lm_head"]
keys = [(l, g) for l in layers for g in ("fprop", "dgrad", "wgrad")]
n_ops = 2 * len(keys)
torch.manual_seed(0)
vec = torch.zeros(n_ops, stats.OPERAND_SCALARS + mxfp4.HIST_BINS + 1, dtype=torch.float64)
vec[:, 0] = 4e6; vec[:, 1] = 3e6; vec[:, 2] = 5; vec[:, 3] = 7; vec[:, 4] = 1e6; vec[:, 5] = 1e3
start = stats.OPERAND_SCALARS
for r in range(n_ops):
    lo = 100 + r % 7
    vec[r, start + lo:start + lo + 18] = torch.randint(1, 100000, (18,)).double()
k = 64
wl = layers
wv = torch.randn(len(wl) * (5 + 2 * k), dtype=torch.float64).abs()
def build():
    return StepStats("run", 10, keys, {key: "mxfp4" for key in keys}, set(), set(), vec, [("mxfp4", 32)] * n_ops, wl, wv, k, True)
def pump_all():
    n = 0
    for rec in build().records():
        line = compact(rec)
        frame = text_frame(telemetry_frame(line, n + 1))
        n += 1
    return n
pump_all()
t = time.perf_counter(); reps = 5 if MOE else 20
for _ in range(reps): n = pump_all()
dt = (time.perf_counter() - t) / reps
print(f"{n} records: {dt*1e3:.1f} ms per stats step, {dt/n*1e6:.1f} µs per record")
t = time.perf_counter()
for _ in range(reps): recs = list(build().records())
dt2 = (time.perf_counter() - t) / reps
print(f"build only: {dt2*1e3:.1f} ms; encode+frame {(dt-dt2)*1e3:.1f} ms")
print("record bytes", len(compact(recs[2])), len(compact(recs[0])))
if "--profile" in sys.argv: cProfile.run("for _ in range(5): pump_all()", "/tmp/pump.prof")
if "--profile" in sys.argv: pstats.Stats("/tmp/pump.prof").sort_stats("tottime").print_stats(14)

# Does a run's own idle steps give the plain-training baseline? One process, CPU: blocks of plain
# steps (no bridge) and a bridge run (observe, statsEvery 10) of the same model, then the run log's
# step times for the extension's estimate. Prints the plain median and writes the run dir.
import os, sys, statistics, time, tempfile, torch, torch.nn.functional as F
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
from llama_mxfp4 import build_model, logits_of
from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config
torch.manual_seed(0); torch.set_num_threads(1)
shape = dict(vocab=512, dim=256, layers=2, heads=4, kv_heads=2, hidden=512)
model, kind = build_model(shape, False)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
gen = torch.Generator().manual_seed(1)
def step(bridge=None, k=0):
    tokens = torch.randint(0, shape["vocab"], (4, 129), generator=gen)
    t = time.perf_counter()
    if bridge: bridge.begin_step(k)
    loss = F.cross_entropy(logits_of(model, tokens[:, :-1]).reshape(-1, shape["vocab"]), tokens[:, 1:].reshape(-1))
    loss.backward()
    if bridge: bridge.end_step(loss=loss.item(), lr=1e-3)
    opt.step(); opt.zero_grad()
    return (time.perf_counter() - t) * 1000
for _ in range(5): step()
plain = [step() for _ in range(60)]
config = run_config(preset="costcheck", seed=1, tokens_per_step=512, stats_every=10, sketch_size=64, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)))
out = tempfile.mkdtemp(prefix="costcheck-")
bridge = Bridge(model, config, out_dir=out, port=0, print_listening=False, handle_exit=False, log=lambda line: None)
bridge.start_run(name="costcheck")
mine = [step(bridge, k) for k in range(200)]
run_dir = bridge.run_dir
bridge.end_run(); bridge.close()
plain += [step() for _ in range(60)]
idle = [ms for k, ms in enumerate(mine) if k % 10 not in (0, 9) and k >= 10]
stats = [ms for k, ms in enumerate(mine) if k % 10 == 0 and k >= 10]
pre = [ms for k, ms in enumerate(mine) if k % 10 == 9]
med = statistics.median
print(f"plain median {med(plain):.2f} ms; bridge run: idle {med(idle):.2f}, stats {med(stats):.2f}, pre {med(pre):.2f} ms")
print(f"true cost against plain (per-kind medians, statsEvery 10): {100 * ((med(stats) + med(pre) + 8 * med(idle)) / (10 * med(plain)) - 1):+.1f} %")
print(f"estimate against the run's own idle steps: {100 * ((med(stats) + med(pre) + 8 * med(idle)) / (10 * med(idle)) - 1):+.1f} %")
print("RUN_DIR", run_dir)

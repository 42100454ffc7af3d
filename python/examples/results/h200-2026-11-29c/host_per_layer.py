# Host cost of the bridge's per-layer work, one thread, GPU never saturated: cProfile by tottime.
import sys, time, cProfile, pstats, tempfile, statistics, os
sys.path.insert(0, 'python')
import torch
from mxscope_bridge import Bridge, run_config
torch.manual_seed(0)
dev = 'cuda'
L = int(os.environ.get('LAYERS', '32'))
model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048, bias=False) for _ in range(L)]).to(dev)
bridge = Bridge(model, run_config(stats_every=10), out_dir=tempfile.mkdtemp(), port=0, print_listening=False, log=lambda l: None,
                backward_thread=os.environ.get('WORKER') == '1')
bridge.start_run('p')
x = torch.randn(8192, 2048, device=dev)
times = {}
profs = {'stats': cProfile.Profile(), 'pre': cProfile.Profile()}
def step(i, profile):
    kind = 'stats' if i % 10 == 0 else 'pre' if i % 10 == 9 else 'off'
    bridge.begin_step(i)
    with torch.autocast('cuda', dtype=torch.bfloat16):
        y = model(x)
    loss = y.float().pow(2).mean()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    p = profs.get(kind) if profile else None
    if p: p.enable()
    loss.backward()
    bridge.end_step(loss=loss.detach())
    if p: p.disable()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    times.setdefault(kind, []).append(((t1 - t0) * 1e3, (t2 - t0) * 1e3))
    model.zero_grad(set_to_none=True)
for i in range(40): step(i, False)
times.clear()
for i in range(40, 100): step(i, False)
for kind, v in times.items():
    print(f"HOST {kind}: backward+end_step host ms median {statistics.median(a for a, _ in v):.2f}, to idle GPU {statistics.median(b for _, b in v):.2f} (n={len(v)}, {L} layers)")
for i in range(100, 140): step(i, True)
for kind, p in profs.items():
    print(f"==== {kind}")
    s = pstats.Stats(p); s.sort_stats('tottime').print_stats(45)
bridge.end_run()

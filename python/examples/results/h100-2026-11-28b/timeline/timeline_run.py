# Experiment: where the capture steps' host time goes. Wraps the backward worker, the hooks' dispatch,
# loss.backward and end_step's drain with perf_counter, then runs bench_bridge.py with the given args;
# prints per step kind medians (ms): backward (host), hook dispatch on autograd's thread, hook blocked in
# the full queue, worker busy, worker idle gaps, drain wait after backward, whole step.
import os, runpy, sys, time, statistics as st
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampler
from mxscope_bridge import backward_worker as bw, observe, bridge as br
cur = {}
rows = []
captures = {}
plain = []
def add(k, v): cur[k] = cur.get(k, 0.0) + v
orig_submit = bw.BackwardWorker.submit
def submit(self, device, work, *args):
    def timed(*a):
        s = time.perf_counter(); 
        if "wfirst" not in cur: cur["wfirst"] = s
        last = cur.get("wend")
        if last is not None: add("wgap", s - last)
        try: work(*a)
        finally:
            e = time.perf_counter(); add("busy", e - s); cur["wend"] = e; add("items", 1)
    t0 = time.perf_counter()
    orig_submit(self, device, timed, *args)
    sampler.state["ident"] = self._thread.ident
    add("put", time.perf_counter() - t0)
bw.BackwardWorker.submit = submit
orig_dispatch = observe._dispatch
def dispatch(*a, **k):
    t0 = time.perf_counter()
    try: return orig_dispatch(*a, **k)
    finally: add("hook", time.perf_counter() - t0)
observe._dispatch = dispatch
orig_backward = torch.Tensor.backward
def backward(self, *a, **k):
    t0 = time.perf_counter(); cur["bstart"] = t0
    try: return orig_backward(self, *a, **k)
    finally:
        cur["bend"] = time.perf_counter(); add("bwd", cur["bend"] - t0)
        if "t0" not in cur: plain.append(cur["bend"] - t0)
torch.Tensor.backward = backward
orig_drain = bw.BackwardWorker.drain
def drain(self):
    t0 = time.perf_counter()
    try: return orig_drain(self)
    finally: add("drain", time.perf_counter() - t0)
bw.BackwardWorker.drain = drain
orig_begin, orig_end = br.Bridge.begin_step, br.Bridge.end_step
def begin(self, step):
    cur.clear(); cur["t0"] = time.perf_counter()
    r = orig_begin(self, step)
    if self.capture is not None:
        captures[id(self)] = captures.get(id(self), 0) + 1
    cur["timed"] = captures.get(id(self), 0) > 3  # the bench's warm-up holds 3 capture steps
    sampler.active["on"] = self.capture is not None and cur["timed"] and self._errors.row_stride == int(os.environ.get("SAMPLE_STRIDE", "1"))
    return r
def end(self, *a, **k):
    kind = None if self.capture is None else ("stats" if self.capture.with_stats else "pre")
    t = time.perf_counter()
    try: return orig_end(self, *a, **k)
    finally:
        if kind:
            cur["endstep"] = time.perf_counter() - t
            cur["kind"] = f"{kind}/stride{self._errors.row_stride}";  cur["tag"] = os.environ.get("TAG", "")
            cur["bwd_to_wend"] = cur.get("wend", 0) - cur.get("bend", 0)
            cur["fwd"] = cur.get("bstart", 0) - cur["t0"]
            rows.append(dict(cur))
        cur.clear()
br.Bridge.begin_step, br.Bridge.end_step = begin, end
import atexit
def report():
    groups = {}
    for r in (r for r in rows if r.get('timed')):
        groups.setdefault(r["kind"], []).append(r)
    for kind, rs in groups.items():
        keys = ["fwd", "bwd", "hook", "put", "busy", "wgap", "bwd_to_wend", "drain", "endstep"]
        print(f"TIMELINE {kind} n={len(rs)} items={st.median(r.get('items',0) for r in rs):.0f} " +
              " ".join(f"{k}={1000*st.median(r.get(k,0) for r in rs):.1f}" for k in keys), flush=True)
    print(f"TIMELINE plain backward n={len(plain)} bwd={1000*st.median(plain[len(plain)//3:]):.1f}", flush=True)
atexit.register(sampler.report)
atexit.register(report)
sys.argv = ["examples/bench_bridge.py"] + sys.argv[1:]
runpy.run_path("examples/bench_bridge.py", run_name="__main__")

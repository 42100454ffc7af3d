"""Runs bench_bridge.py with every Triton/Gluon compile logged: kernel, ms, whether a timed block
was running, and the specialization key (what made this compile new)."""
import os, sys, time, runpy, collections
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import triton.runtime.jit as jit

counts = collections.Counter()
original = jit.JITFunction._do_compile

def _do_compile(self, key, *args, **kwargs):
    started = time.perf_counter()
    result = original(self, key, *args, **kwargs)
    ms = (time.perf_counter() - started) * 1000
    bench = sys.modules.get("__main__")
    timed = getattr(bench, "TIMED", {}).get("now") if bench is not None else None
    name = getattr(self, "__name__", None) or getattr(getattr(self, "fn", None), "__name__", "?")
    counts[(name, bool(timed))] += 1
    print(f"COMPILE {name} {ms:.0f} ms timed={timed} key={str(key)[:300]}", flush=True)
    return result

jit.JITFunction._do_compile = _do_compile
sys.argv = ["bench_bridge.py"] + sys.argv[1:]
try:
    runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "python", "examples", "bench_bridge.py"), run_name="__main__")
finally:
    print("COMPILE COUNTS", dict(counts), flush=True)

# A sampling profiler of the backward worker thread: every INTERVAL s, the worker's Python stack, by
# its innermost frames; counts per (file:line function) of the innermost 1 frame and of 3 frames.
import collections, os, sys, threading, time
INTERVAL = float(os.environ.get("SAMPLE_S", "0.0005"))
leaf = collections.Counter(); chain = collections.Counter(); own = collections.Counter(); func = collections.Counter()
active = {"on": False}
state = {"ident": None}  # the current bridge's worker thread
def _name(f):
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} {f.f_code.co_name}"
def _loop():
    while True:
        time.sleep(INTERVAL)
        if not active["on"]:
            continue
        f = sys._current_frames().get(state["ident"])
        if f is None:
            continue
        frames = []
        while f is not None:
            frames.append(f); f = f.f_back
        if any(x.f_code.co_name == "get" and x.f_code.co_filename.endswith("queue.py") for x in frames[:3]):
            leaf["<idle: queue.get>"] += 1; continue
        leaf[_name(frames[0])] += 1
        chain[" < ".join(_name(x) for x in frames[:3])] += 1
        mine = next((x for x in frames if "mxscope_bridge" in x.f_code.co_filename), None)
        if mine is not None:
            own[_name(mine)] += 1
        for x in {x.f_code for x in frames if "mxscope_bridge" in x.f_code.co_filename}:
            func[f"{os.path.basename(x.co_filename)} {x.co_name}"] += 1
# Unbiased samples need the sampler to get the GIL while the worker runs Python: a short switch interval.
sys.setswitchinterval(float(os.environ.get("SWITCH_S", "0.0002")))
threading.Thread(target=_loop, daemon=True, name="sampler").start()
def report(top=35):
    total = sum(leaf.values())
    for title, c in (("innermost frame", leaf), ("innermost mxscope_bridge frame", own), ("3 innermost frames", chain), ("inclusive, by mxscope_bridge function", func)):
        print(f"SAMPLES {title}: {total} samples")
        for k, v in c.most_common(top):
            print(f"SAMPLES {100*v/total:5.1f}% {k}")

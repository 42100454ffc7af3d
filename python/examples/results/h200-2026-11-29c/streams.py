import json, sys
from collections import defaultdict
for path in sys.argv[1:]:
    ev = json.load(open(path))
    ev = ev.get("traceEvents", ev)
    k = [e for e in ev if e.get("cat") == "kernel" and "dur" in e]
    by = defaultdict(lambda: defaultdict(float))
    for e in k:
        by[e["tid"]][e["name"][:70]] += e["dur"] / 1e3
    print("==", path)
    for tid, names in by.items():
        print(f"  stream {tid}: {sum(names.values()):.1f} ms")
        for n, ms in sorted(names.items(), key=lambda x: -x[1])[:12]:
            print(f"     {ms:7.2f}  {n}")

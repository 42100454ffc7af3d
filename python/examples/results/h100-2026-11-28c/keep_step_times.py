"""Copies bench_bridge.py's run logs (--run-logs SRC) to DST with only what the extension's telemetry
cost reads: every record but layerStats, and one layerStats record per stats step (the store learns
which steps are stats steps from them). A 1.1 B model's full logs are megabytes each.

    python3 keep_step_times.py SRC DST
"""
import json
import os
import shutil
import sys

src, dst = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    run = os.path.join(src, name)
    if not os.path.isfile(os.path.join(run, "run.json")):
        continue
    os.makedirs(os.path.join(dst, name), exist_ok=True)
    shutil.copy(os.path.join(run, "run.json"), os.path.join(dst, name, "run.json"))
    seen = set()
    with open(os.path.join(run, "telemetry.ndjson")) as f, open(os.path.join(dst, name, "telemetry.ndjson"), "w") as out:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "layerStats":
                if record["step"] in seen:
                    continue
                seen.add(record["step"])
            out.write(line)
    print(name, "stats steps kept:", len(seen))

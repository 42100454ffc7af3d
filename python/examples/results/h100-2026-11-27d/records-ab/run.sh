cd python
for code in old new old new; do
  cp ../.scratch/ab/$code/*.py mxscope_bridge/
  n=1; while [ -e $OUT/$code-$n.log ]; do n=$((n+1)); done
  timeout 130 python3 examples/bench_bridge.py --shapes 8x1024 --layer-groups 1 --emulated "" --rounds 6 --results $OUT/$code-$n.json > $OUT/$code-$n.log 2>&1
  echo "$code-$n: $(grep 'per-kind medians' $OUT/$code-$n.log | head -1)"
done
python3 - <<'PY'
import json, glob, os, statistics as st
for f in sorted(glob.glob(os.environ["OUT"] + "/*.json")):
    r = json.load(open(f))["runs"][0]; s = r["samples"]; pm = st.median(s["plain"]); off = s["off"]
    first = [off[i] - pm for i in range(0, len(off), 8)]
    means = {k: st.mean(v) for k, v in s.items()}
    ov = (means["stats"] + means["pre"] + 8 * means["off"]) / (10 * means["plain"]) - 1
    med = {k: st.median(v) for k, v in s.items()}
    ovm = (med["stats"] + med["pre"] + 8 * med["off"]) / (10 * med["plain"]) - 1
    print(os.path.basename(f), "first-off excess ms", [round(x) for x in first], "mean", round(st.mean(first), 1), "| overhead means %.1f%% medians %.1f%%" % (100 * ov, 100 * ovm), "stats", [round(x) for x in s["stats"]])
PY

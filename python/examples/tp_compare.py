"""Compares the layer stats of two run logs record by record (tp_pair.py's unsharded and sharded runs):
prints how many operand records agree exactly, and the first differences."""
import json
import sys


def layer_stats(path):
    with open(path) as f:
        records = [json.loads(line) for line in f]
    return {(r["step"], r["layer"], r["gemm"]): r for r in records if r["type"] == "layerStats"}


def main(a_path, b_path):
    a, b = layer_stats(a_path), layer_stats(b_path)
    same = differ = 0
    worst = {}
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            print("only in one log:", key)
            differ += 1
            continue
        for oa, ob in zip(a[key]["operands"], b[key]["operands"]):
            fields = ("operand", "blocks", "elements", "histogram", "saturatedFrac", "flushedFrac")
            if all(oa.get(f) == ob.get(f) for f in fields):
                same += 1
            else:
                differ += 1
                if differ <= 4:
                    print("differs:", key, {f: (oa.get(f), ob.get(f)) for f in fields if oa.get(f) != ob.get(f)})
        ea, eb = a[key].get("wgradError"), b[key].get("wgradError")
        if ea and eb:
            for field in ("gradNorm", "errNorm", "relErr", "lag1Cos"):
                if ea[field] is not None and eb[field] is not None:
                    worst[field] = max(worst.get(field, 0.0), abs(ea[field] - eb[field]) / max(abs(ea[field]), 1e-30))
    print(f"TP_COMPARE layerStats keys {len(a)} vs {len(b)}; operands equal {same}, different {differ}; "
          f"Wgrad error, largest relative difference: {json.dumps(worst)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""Compares the layer stats of two run logs record by record (tp_pair.py's unsharded and sharded runs):
prints how many operand records agree exactly, and the first differences."""
import json
import sys

FIELDS = ("operand", "blocks", "elements", "histogram", "saturatedFrac", "flushedFrac")


def layer_stats(path):
    with open(path) as f:
        records = [json.loads(line) for line in f]
    return {(r["step"], r["layer"], r["gemm"]): r for r in records if r["type"] == "layerStats"}


def compare(a_path, b_path) -> dict:
    """keys: (step, layer, gemm) of each log; equal / different: (key, operand) pairs whose FIELDS agree
    or not (differences: those fields' two values); worst: the largest relative difference per Wgrad
    error field."""
    a, b = layer_stats(a_path), layer_stats(b_path)
    equal, different, differences, worst = [], [], {}, {}
    for key in sorted(set(a) & set(b)):
        for oa, ob in zip(a[key]["operands"], b[key]["operands"]):
            if all(oa.get(f) == ob.get(f) for f in FIELDS):
                equal.append((key, oa["operand"]))
            else:
                different.append((key, oa["operand"]))
                differences[(key, oa["operand"])] = {f: (oa.get(f), ob.get(f)) for f in FIELDS if oa.get(f) != ob.get(f)}
        ea, eb = a[key].get("wgradError"), b[key].get("wgradError")
        if ea and eb:
            for field in ("gradNorm", "errNorm", "relErr", "lag1Cos"):
                if ea[field] is not None and eb[field] is not None:
                    worst[field] = max(worst.get(field, 0.0), abs(ea[field] - eb[field]) / max(abs(ea[field]), 1e-30))
    return {"keys": (sorted(a), sorted(b)), "equal": equal, "different": different, "differences": differences, "worst": worst}


def main(a_path, b_path):
    result = compare(a_path, b_path)
    keys_a, keys_b = result["keys"]
    for key in sorted(set(keys_a) ^ set(keys_b)):
        print("only in one log:", key)
    for pair in result["different"][:4]:
        print("differs:", pair, result["differences"][pair])
    print(f"TP_COMPARE layerStats keys {len(keys_a)} vs {len(keys_b)}; operands equal {len(result['equal'])}, "
          f"different {len(result['different']) + len(set(keys_a) ^ set(keys_b))}; "
          f"Wgrad error, largest relative difference: {json.dumps(result['worst'])}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

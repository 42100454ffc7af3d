"""The bridge in a public training script we did not write: karpathy/nanoGPT's train.py.

    git clone https://github.com/karpathy/nanoGPT /tmp/nanoGPT
    python3 python/examples/try_nanogpt.py --nanogpt /tmp/nanoGPT [--iters 30]

A copy of train.py gets the README's lines (a Bridge on the model before DDP and compile wrap it,
`micro_batches` = its gradient accumulation steps, begin_step before the micro-steps, end_step
after them, close at the end), placed by anchors in its text. It trains the shakespeare_char
config on random characters (no download) once without the bridge and then with it observing and
emulating, with and without torch.compile, and prints per run the median iteration time nanoGPT
reports, the layers the bridge saw and the stats records its run log holds.
"""
import argparse
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

BRIDGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: (anchor line in train.py, lines put before it); each anchor must occur once.
PATCHES = [
    ("# wrap model into DDP container", [
        "import sys as _sys, os as _os",
        f"_sys.path.insert(0, {BRIDGE!r})",
        "from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config",
        "_mode = _os.environ.get('MXSCOPE_MODE', 'off')",
        "bridge = None",
        "if _mode != 'off':",
        "    bridge = Bridge(unoptimized_model if compile else model,",
        "                    run_config(stats_every=5, tokens_per_step=tokens_per_iter, gemms=default_gemms(gemm_config('mxfp4', 'hadamard', 32))),",
        "                    emulate=_mode == 'emulate', micro_batches=gradient_accumulation_steps, serve=False,",
        "                    out_dir=_os.environ['MXSCOPE_OUT'], print_listening=False)",
        "    bridge.start_run()",
    ]),
    ("    for micro_step in range(gradient_accumulation_steps):", [
        "    if bridge is not None:",
        "        bridge.begin_step(iter_num)",
    ]),
    ("    # clip the gradient", [
        "    if bridge is not None:",
        "        bridge.end_step(loss=loss.detach() * gradient_accumulation_steps, lr=lr)",
    ]),
]


def patched(train_py: str) -> str:
    lines = train_py.splitlines()
    for anchor, added in PATCHES:
        at = [i for i, line in enumerate(lines) if line == anchor]
        if len(at) != 1:
            raise SystemExit(f"train.py: the anchor {anchor!r} occurs {len(at)} times (nanoGPT changed?): place the bridge's lines by hand")
        lines[at[0]:at[0]] = added
    return "\n".join(lines + ["if bridge is not None:", "    bridge.close()", ""])


def prepare(nanogpt: str, work: str) -> None:
    for name in ("train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py"):
        os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
        shutil.copy(os.path.join(nanogpt, name), os.path.join(work, name))
    with open(os.path.join(work, "train.py")) as f:
        text = patched(f.read())
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(text)
    import numpy as np
    data = os.path.join(work, "data", "shakespeare_char")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, size in (("train", 1_000_000), ("val", 100_000)):
        rng.integers(0, 65, size, dtype=np.uint16).tofile(os.path.join(data, f"{split}.bin"))
    with open(os.path.join(data, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": 65}, f)


def run(work: str, mode: str, compile_: bool, iters: int, accumulation: int, extra) -> str:
    out = tempfile.mkdtemp(prefix="mxscope-nanogpt-")
    args = [sys.executable, "train.py", "config/train_shakespeare_char.py", f"--max_iters={iters}", "--eval_interval=100000",
            "--eval_iters=1", "--log_interval=1", f"--compile={compile_}", f"--gradient_accumulation_steps={accumulation}",
            "--always_save_checkpoint=False", f"--out_dir={out}/ckpt", *extra]
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, env=dict(os.environ, MXSCOPE_MODE=mode, MXSCOPE_OUT=out), timeout=900)
    times = [float(t) for t in re.findall(r"^iter \d+: loss [\d.]+, time ([\d.]+)ms", done.stdout, re.M)][5:]
    layers = records = wgrad = 0
    runs = [d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "telemetry.ndjson"))]
    if runs:
        with open(os.path.join(out, runs[0], "telemetry.ndjson")) as f:
            for line in f:
                record = json.loads(line)
                if record["type"] == "runStarted":
                    layers = len(record["layers"])
                elif record["type"] == "layerStats":
                    records += 1
                    wgrad += "wgradError" in record
    result = "ok" if done.returncode == 0 else "exit %d: %s" % (done.returncode, (done.stderr.strip().splitlines() or ["?"])[-1][:200])
    median = f"{statistics.median(times):.1f}" if times else "-"
    return f"| {mode} | {compile_} | {accumulation} | {median} | {layers} | {records} ({wgrad} with a Wgrad error) | {result} |"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nanogpt", required=True, help="a checkout of github.com/karpathy/nanoGPT")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--accumulation", type=int, default=4, help="gradient accumulation steps (the bridge's micro_batches)")
    parser.add_argument("--compile", default="False,True", help="torch.compile settings to run")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--small", action="store_true", help="a 2-layer model at batch 4 (a CPU smoke run)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="nanogpt-")
    prepare(args.nanogpt, work)
    top = subprocess.run(["git", "-C", args.nanogpt, "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    commit = "?"
    if top and os.path.samefile(top, args.nanogpt):
        commit = subprocess.run(["git", "-C", args.nanogpt, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    elif os.path.exists(os.path.join(args.nanogpt, "COMMIT")):  # a copy of its files
        with open(os.path.join(args.nanogpt, "COMMIT")) as f:
            commit = f.read().strip()
    print(f"nanoGPT {commit}, shakespeare_char config on random characters, {args.iters} iterations; time: nanoGPT's own, median after the first 5")
    print("| bridge | compile | accumulation | ms per iteration | layers | layerStats records | result |")
    print("|---|---|---|---|---|---|---|")
    extra = [f"--device={args.device}"] + (["--n_layer=2", "--batch_size=4", "--block_size=64", "--dtype=float32"] if args.small else [])
    for compile_ in args.compile.split(","):
        for mode in ("off", "observe", "emulate"):
            print(run(work, mode, compile_, args.iters, args.accumulation, extra), flush=True)


if __name__ == "__main__":
    main()

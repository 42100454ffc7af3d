"""A bridge serving a tiny emulated model, for test/bridge/*.test.ts: prints the listening line,
trains one run per startRun request (with the next-run config the client set), and exits when
stdin closes or no startRun arrives for a minute."""
import argparse
import os
import sys
import threading

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mxscope_bridge import Bridge, default_gemms, emulate, run_config  # noqa: E402
from tests.helpers import TinyNet, train  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--token", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyNet()
    emulate(model)
    config = run_config(preset="bridge-fixture", steps=20, tokens_per_step=64, stats_every=10, sketch_size=8, gemms=default_gemms())
    bridge = Bridge(model, config, out_dir=args.out, token=args.token, port=0)
    stdin_closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    while not stdin_closed.is_set():
        started = bridge.wait_for_start(timeout=1.0)
        if started is None:
            continue
        train(model, bridge, started["steps"])
        bridge.end_run()
    bridge.close()


if __name__ == "__main__":
    main()

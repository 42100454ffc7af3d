"""A script that serves one run with bridge.runs() and leaves it as `mode` says, for
tests/test_runloop.py: a thread plays the extension and presses Start."""
import os
import signal
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mxscope_bridge import Bridge, run_config  # noqa: E402
from tests.helpers import TinyNet  # noqa: E402
from tests.wsclient import Client  # noqa: E402


def press_start(url):
    client = Client(url)
    client.recv()
    client.send({"type": "startRun", "id": "r1"})
    client.recv_until(lambda m: m.get("id") == "r1")


def main(mode, out):
    model = TinyNet()
    bridge = Bridge(model, run_config(steps=50, stats_every=5, tokens_per_step=64), out_dir=out, port=0, print_listening=False)
    threading.Thread(target=press_start, args=(bridge.server.connect_url,), daemon=True).start()

    def body():
        for run in bridge.runs(idle_timeout=60):
            print(os.path.join(out, run.id), flush=True)
            for step in run.steps():
                model(torch.randn(2, 8, 64)).pow(2).mean().backward()
                run.end_step(loss=1.0)
                if step == 2:
                    if mode == "break":
                        break
                    if mode in ("raise", "raise-no-with"):
                        raise ValueError("boom")
                    if mode == "interrupt":
                        raise KeyboardInterrupt
                    if mode == "sigterm":
                        os.kill(os.getpid(), signal.SIGTERM)
                        time.sleep(5)
            if mode == "break":
                break
        if mode == "break":
            time.sleep(0.2)  # the run ends when the bridge is next used or closed, keeping when it was left

    if mode == "raise-no-with":
        body()
    else:
        with bridge:
            body()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

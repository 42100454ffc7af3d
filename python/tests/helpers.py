"""A tiny model and a training loop driving the bridge, shared by the tests."""
import json
import os
from pathlib import Path

import torch

from mxscope_bridge import Bridge, default_gemms, emulate, gemm_config, run_config


#: The golden MXFP4 vectors: ../shared/testdata/mxfp4 beside the checkout, else testdata/mxfp4 in it
#: (a GPU machine gets the repository without shared/; copy the vectors there).
_GOLDEN_DIRS = [Path(__file__).resolve().parents[2].parent / "shared" / "testdata" / "mxfp4", Path(__file__).resolve().parents[2] / "testdata" / "mxfp4"]


def golden_dir() -> Path:
    """The first of _GOLDEN_DIRS that exists (the first, to name in a failure, when none does)."""
    return next((d for d in _GOLDEN_DIRS if d.is_dir()), _GOLDEN_DIRS[0])


class TinyNet(torch.nn.Module):
    """Two blocks of (up, down) linears and an lm_head: 5 nn.Linear, one with a bias."""

    def __init__(self, dim=64, hidden=96, vocab=32):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({"up": torch.nn.Linear(dim, hidden, bias=False), "down": torch.nn.Linear(hidden, dim)}) for _ in range(2))
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        for block in self.blocks:
            x = x + block["down"](torch.nn.functional.gelu(block["up"](x)))
        return self.lm_head(x)


def mx_gemms(rotation="hadamard"):
    return default_gemms(gemm_config("mxfp4", rotation, 32))


def train(model, bridge, steps, batch=(4, 16, 64), seed=0, lr=0.01):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        bridge.begin_step(step)
        # As an embedding's output needs a gradient, so does x: the first layer's Dgrad runs.
        x = torch.randn(*batch, generator=generator).requires_grad_()
        loss = model(x).pow(2).mean()
        loss.backward()
        bridge.end_step(loss=loss.item(), lr=lr)
        optimizer.step()
        optimizer.zero_grad()


def bridge_for(model, out_dir, gemms=None, stats_every=5, stats_layer_groups=1, wgrad_error_scope="batch", wgrad_error_row_stride=1,
               wgrad_error_lag1=True, **kwargs):
    config = run_config(preset="tiny-test", gemms=gemms or mx_gemms(), stats_every=stats_every, sketch_size=16, tokens_per_step=64,
                        stats_layer_groups=stats_layer_groups, wgrad_error_scope=wgrad_error_scope, wgrad_error_row_stride=wgrad_error_row_stride,
                        wgrad_error_lag1=wgrad_error_lag1)
    kwargs.setdefault("port", 0)
    kwargs.setdefault("handle_exit", False)
    return Bridge(model, config, out_dir=out_dir, print_listening=False, **kwargs)


def run_and_read(test, model, out_dir, steps, **kwargs):
    """One run of `steps` training steps with a bridge (closed at the test's cleanup):
    (bridge, the run log's records, the run directory)."""
    bridge = bridge_for(model, out_dir, **kwargs)
    test.addCleanup(bridge.close)
    bridge.start_run()
    train(model, bridge, steps)
    run_dir = bridge.run_dir
    bridge.end_run()
    return bridge, read_log(run_dir), run_dir


def one_stats_step(test, model, out_dir, loss, emulated=False):
    """The layerStats records of one stats step of `model` under mx_gemms(): `loss()` runs its forward
    and returns the loss; with `emulated`, its layers are emulated first."""
    if emulated:
        emulate(model, mx_gemms())
    bridge = bridge_for(model, out_dir, gemms=mx_gemms())
    test.addCleanup(bridge.close)
    bridge.start_run()
    bridge.begin_step(0)
    loss().backward()
    bridge.end_step(loss=0.0)
    run_dir = bridge.run_dir
    bridge.end_run()
    return [r for r in read_log(run_dir) if r["type"] == "layerStats"]


def read_log(run_dir):
    with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
        return [json.loads(line) for line in f]

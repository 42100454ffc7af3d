"""A step record's stepMs is the whole iteration: from its begin_step to the next begin_step (or the
run's end), so the optimizer's step and the script's waits after end_step count, as they do in the
training's wall clock. The extension's telemetry cost compares these times across step kinds."""
import tempfile
import time
import unittest

import torch

from mxscope_bridge import Bridge, run_config

from tests.helpers import TinyNet, read_log


def run_steps(after_end_step_s, step_ms=None, steps=3):
    """A run of `steps` steps whose script sleeps `after_end_step_s` after each end_step (an optimizer
    step, a loss.item()); returns its run log."""
    model = TinyNet()
    bridge = Bridge(model, run_config(steps=steps, stats_every=2, tokens_per_step=32), out_dir=tempfile.mkdtemp(),
                    serve=False, print_listening=False, handle_exit=False)
    bridge.start_run(name="times")
    for step in range(steps):
        bridge.begin_step(step)
        model(torch.randn(2, 16, 64)).pow(2).mean().backward()
        bridge.end_step(loss=1.0, step_ms=step_ms)
        time.sleep(after_end_step_s)
    run_dir = bridge.run_dir
    bridge.end_run()
    bridge.close()
    return read_log(run_dir)


class StepTimes(unittest.TestCase):
    def test_the_time_after_end_step_counts_and_the_last_step_goes_out_before_run_ended(self):
        records = run_steps(0.2)
        steps = [r for r in records if r["type"] == "step"]
        self.assertEqual([r["step"] for r in steps], [0, 1, 2])
        for record in steps:
            self.assertGreaterEqual(record["stepMs"], 200, f"step {record['step']}: the 200 ms after end_step are the step's")
        self.assertEqual(records[-1]["type"], "runEnded")
        self.assertEqual(records[-2]["type"], "step", "the last step's record comes before runEnded")
        # A stats step's layer stats go out at its end_step, its step record when the next step begins.
        kinds = [(r["type"], r.get("step")) for r in records if r["type"] in ("step", "layerStats")]
        self.assertLess(kinds.index(("layerStats", 0)), kinds.index(("step", 0)))

    def test_a_step_time_the_script_gives_is_sent_as_given_at_end_step(self):
        records = run_steps(0.05, step_ms=12.5)
        self.assertEqual([r["stepMs"] for r in records if r["type"] == "step"], [12.5, 12.5, 12.5])


if __name__ == "__main__":
    unittest.main()

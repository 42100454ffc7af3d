"""The GPU example script runs end to end on CPU at toy size (so it cannot rot unseen)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "llama_mxfp4.py")


class Example(unittest.TestCase):
    def run_example(self, *extra):
        out = tempfile.mkdtemp(prefix="mxscope-example-")
        done = subprocess.run([sys.executable, EXAMPLE, "--tiny", "--device", "cpu", "--no-transformers", "--steps", "8", "--block", "2",
                               "--warmup", "0", "--stats-every", "4", "--seq", "32", "--batch", "2", "--rotation", "random-hadamard",
                               "--out", out, "--results", os.path.join(out, "results.json"), *extra], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        return out, done

    def test_the_opt_in_row_stride_reaches_the_run_and_its_results(self):
        out, _ = self.run_example("--wgrad-error-row-stride", "4")
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["wgradErrorRowStride"], 4)
        with open(os.path.join(results["runDir"], "telemetry.ndjson")) as f:
            started = json.loads(f.readline())
        self.assertEqual(started["config"]["wgradErrorRowStride"], 4)
        for layer in started["layers"]:
            self.assertTrue(all((i // layer["inFeatures"]) % 4 == 0 for i in layer["sketchIndices"]), layer["name"])

    def test_tiny_llama_trains_with_the_bridge_and_reports_figures(self):
        out, done = self.run_example()
        self.assertTrue(done.stdout.startswith("MXSCOPE_LISTENING "), done.stdout[:200])
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["steps"], 8)
        self.assertEqual(results["timedSteps"], {"with": 4, "without": 4})
        self.assertGreater(results["telemetryBytesPerStep"], 1000)
        # No Triton on the CPU: nothing compiled, and the figures say so (compile_watch.py)
        self.assertEqual((results["compiles"]["compiles"], results["compiles"]["timedCompiles"]), (0, 0))
        self.assertIn("COMPILES rank 0: Triton compiles: 0 (0 ms), none in timed steps", done.stdout)
        with open(os.path.join(results["runDir"], "telemetry.ndjson")) as f:
            records = [json.loads(line) for line in f]
        stats_steps = sorted({r["step"] for r in records if r["type"] == "layerStats"})
        self.assertEqual(stats_steps, [0, 4])  # steps 0, 3-4 and 7 ran with the bridge
        self.assertEqual(records[-1]["type"], "runEnded")

    def test_profiled_steps_write_their_tables_and_timelines_and_are_not_timed(self):
        traces = tempfile.mkdtemp(prefix="mxscope-traces-")
        out, done = self.run_example("--profile-steps", "3,4", "--trace-dir", traces)
        profiled = [line.split(" (")[0] for line in done.stdout.splitlines() if line.startswith("PROFILE ")]
        self.assertEqual(profiled, ["PROFILE rank 0 step 3", "PROFILE rank 0 step 4"], done.stdout[-3000:])
        self.assertEqual(sorted(os.listdir(traces)), ["trace-rank0-step3.json", "trace-rank0-step4.json"])
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual(results["timedSteps"], {"with": 2, "without": 4}, "steps 3 and 4 (with the bridge) profiled, so not timed")


if __name__ == "__main__":
    unittest.main()

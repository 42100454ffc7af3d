"""statsLayerGroups (opt-in, protocol 1.3): each stats step reports one group of layers in turn, and
what it reports is exactly what an ungrouped run reports for those layers at that step."""
import tempfile
import unittest

import torch

from mxscope_bridge import Bridge, run_config
from mxscope_bridge.config import ConfigError, check_layer_groups

from tests.helpers import TinyNet, mx_gemms, read_log, train

LINEARS = ["blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down", "lm_head"]


class LayerGroups(unittest.TestCase):
    def run_log(self, groups, steps=16):
        torch.manual_seed(0)
        model = TinyNet()
        config = run_config(preset="tiny-test", gemms=mx_gemms(), stats_every=5, sketch_size=16, tokens_per_step=64, stats_layer_groups=groups)
        bridge = Bridge(model, config, out_dir=tempfile.mkdtemp(prefix="mxscope-test-"), print_listening=False, port=0, handle_exit=False)
        self.addCleanup(bridge.close)
        bridge.start_run()
        train(model, bridge, steps)
        run_dir = bridge.run_dir
        bridge.end_run()
        return read_log(run_dir)

    @staticmethod
    def stats_by_step(records):
        by_step = {}
        for r in records:
            if r["type"] == "layerStats":
                by_step.setdefault(r["step"], {})[(r["layer"], r["gemm"])] = {k: v for k, v in r.items() if k not in ("runId", "seq")}
        return by_step

    def test_each_stats_step_reports_its_group_exactly_as_an_ungrouped_run(self):
        every = self.stats_by_step(self.run_log(1))
        grouped_records = self.run_log(2)
        self.assertEqual(grouped_records[0]["config"]["statsLayerGroups"], 2, "runStarted carries the label")
        grouped = self.stats_by_step(grouped_records)
        self.assertEqual(sorted(grouped), [0, 5, 10, 15])
        for step, records in grouped.items():
            group = (step // 5) % 2
            want_layers = [name for i, name in enumerate(LINEARS) if i % 2 == group]
            self.assertEqual(sorted({layer for layer, _ in records}), sorted(want_layers), f"step {step}")
            self.assertEqual(records, {key: every[step][key] for key in records}, f"step {step}: the same values as every layer's run")
        lag1 = [r["wgradError"]["lag1Cos"] for r in grouped[5].values() if r["gemm"] == "wgrad"]
        self.assertTrue(lag1 and all(c is not None for c in lag1), "the step before keeps E of the next stats step's group")

    def test_refused_where_it_cannot_be_honoured(self):
        with self.assertRaisesRegex(ConfigError, "statsLayerGroups 2 needs statsEvery of at least 2"):
            run_config(stats_every=1, stats_layer_groups=2)
        for bad in (0, 1025, 2.5, True):
            with self.assertRaisesRegex(ConfigError, "statsLayerGroups: expected an integer from 1 to 1024"):
                check_layer_groups(dict(run_config(), statsLayerGroups=bad))
        with self.assertRaisesRegex(ConfigError, "needs statsEvery of at least 2"):
            Bridge(TinyNet(), dict(run_config(), statsEvery=1, statsLayerGroups=3), out_dir=None, serve=False, handle_exit=False)


if __name__ == "__main__":
    unittest.main()

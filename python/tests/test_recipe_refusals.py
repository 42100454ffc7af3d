"""Recipes that cannot run are refused when the run is configured, naming what to change: the cases
the TypeScript trainer holds too (test/fixtures/recipe-refusals.json), at gemm_config, at attach and
start_run, and for a client's next-run change; and a sweep over every combination of the recipe
fields: each is refused (naming the GEMM field and what to change) or trains through the emulation."""
import itertools
import json
import tempfile
import unittest
from pathlib import Path

import torch

from mxscope_bridge import default_gemms, emulate
from mxscope_bridge.config import ConfigError, check_gemm, next_run_problems, recipe_problems
from mxscope_bridge.link import RequestError

from .helpers import TinyNet, bridge_for

FIXTURE = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "recipe-refusals.json"
BASE = {"precision": "mxfp4", "rotation": "none", "hadamardBlock": 16, "rounding": "nearest-even", "srPrescale": False}


class RecipeRefusals(unittest.TestCase):
    def test_the_shared_cases_are_refused_or_accepted_as_the_fixture_says(self):
        cases = json.loads(FIXTURE.read_text())["cases"]
        self.assertGreaterEqual(len(cases), 10)
        for case in cases:
            with self.subTest(case["name"]):
                gemm = dict(BASE, **case["gemm"])
                problems = recipe_problems(gemm)
                if case["python"] is None:
                    self.assertEqual(problems, [])
                    check_gemm(gemm, "gemms.wgrad")
                else:
                    self.assertTrue(any(case["python"] in p for p in problems), problems)
                    with self.assertRaisesRegex(ConfigError, r"^gemms\.wgrad: "):
                        check_gemm(gemm, "gemms.wgrad")

    def test_a_bridge_refuses_at_attach_and_a_client_change_is_refused_when_made(self):
        bad = default_gemms(dict(BASE, precision="nvfp4", scaleRule="rceil"))
        with tempfile.TemporaryDirectory() as out:
            with self.assertRaisesRegex(ConfigError, r"config\.gemms\.fprop: scale rule 'rceil' .*set scaleRule to floor"):
                bridge_for(TinyNet(), out, gemms=bad)
        config = {"gemms": default_gemms(dict(BASE))}
        self.assertEqual(next_run_problems(config), "")
        config["gemms"]["dgrad"] = dict(BASE, precision="mxfp8", rounding="stochastic")
        self.assertRegex(next_run_problems(config), r"^gemms\.dgrad: stochastic rounding .* set rounding to nearest-even")
        with tempfile.TemporaryDirectory() as out:
            bridge = bridge_for(TinyNet(), out, gemms=default_gemms(dict(BASE)))
            self.addCleanup(bridge.close)
            link = bridge.server
            change = {"type": "setNextRunConfig", "id": "r", "change": {"gemms": {"wgrad": {"nvfp4Weight2d": True}}}}
            with self.assertRaisesRegex(RequestError, r"gemms\.wgrad: nvfp4Weight2d needs precision nvfp4 \(it is mxfp4\)"):
                link._handle(None, change)  # the request's handling; over the wire it becomes an invalid-message error
            self.assertNotIn("nvfp4Weight2d", link._next_run_config["gemms"]["wgrad"], "a refused change leaves the next run as it was")

    def test_every_combination_is_refused_naming_what_to_change_or_trains(self):
        trained = refused = 0
        torch.manual_seed(0)
        x = torch.randn(2, 8, 64)
        for precision, rotation, rounding, prescale, rule, tiles in itertools.product(
                ("fp32", "bf16", "fp8", "mxfp4", "nvfp4", "mxfp8"), ("none", "fixed-sign-hadamard"), ("nearest-even", "stochastic"),
                (False, True), ("floor", "rceil", "even"), (False, True)):
            gemm = dict(BASE, precision=precision, rotation=rotation, rounding=rounding, srPrescale=prescale, scaleRule=rule, nvfp4Weight2d=tiles)
            where = json.dumps(gemm)
            problems = recipe_problems(gemm)
            if problems:
                refused += 1
                for problem in problems:
                    self.assertRegex(problem, r"(set|turn it off)", where)
                continue
            layer = torch.nn.Linear(64, 32, bias=False)
            emulate(layer, default_gemms(gemm))
            layer(x).pow(2).mean().backward()
            self.assertTrue(torch.isfinite(layer.weight.grad).all(), where)
            trained += 1
        self.assertGreater(refused, 50)
        self.assertGreater(trained, 50)


if __name__ == "__main__":
    unittest.main()

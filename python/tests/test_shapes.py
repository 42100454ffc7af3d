"""Any shape: partial MX blocks, a Hadamard block that does not divide a reduction dimension (padded,
skipped or refused at attach time), reported per layer and GEMM in runStarted."""
import tempfile
import unittest

import torch

from mxscope_bridge import default_gemms, emulate, gemm_config
from mxscope_bridge.rotation import fit

from tests.helpers import bridge_for, read_log


class OddVocab(torch.nn.Module):
    """A character-level head: vocab 82 (not a multiple of 32), dim 48 (not a multiple of 32)."""

    def __init__(self, vocab=82, dim=48):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.mix = torch.nn.Linear(dim, dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # weight tying

    def forward(self, tokens):
        return self.lm_head(torch.relu(self.mix(self.embed(tokens))))


def train_steps(model, bridge, steps=3, tokens=(3, 11)):
    generator = torch.Generator().manual_seed(0)
    for step in range(steps):
        bridge.begin_step(step)
        batch = torch.randint(0, 82, tokens, generator=generator)
        logits = model(batch)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 82), batch.reshape(-1))
        loss.backward()
        bridge.end_step(loss=loss.item())
        model.zero_grad()


class Shapes(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-shapes-")

    def run_odd(self, rotation="hadamard", block=32, emulated=False, misfit="pad"):
        torch.manual_seed(0)
        model = OddVocab()
        gemms = default_gemms(gemm_config("mxfp4", rotation, block))
        if emulated:
            emulate(model, gemms)
        bridge = bridge_for(model, self.out, gemms=gemms, stats_every=2, hadamard_misfit=misfit)
        self.addCleanup(bridge.close)
        bridge.start_run()
        train_steps(model, bridge)  # 33 tokens per step: wgrad's reduction dim is odd too
        run_dir = bridge.run_dir
        bridge.end_run()
        return read_log(run_dir)

    def test_odd_vocab_and_token_count_train_with_hadamard_in_both_modes(self):
        for emulated in (False, True):
            records = self.run_odd(emulated=emulated)
            self.assertEqual(records[-1]["status"], "completed")
            fits = {layer["name"]: layer["rotationFit"] for layer in records[0]["layers"]}
            self.assertEqual(fits["lm_head"]["fprop"], {"status": "padded", "dim": 48, "paddedTo": 64})
            self.assertEqual(fits["lm_head"]["dgrad"], {"status": "padded", "dim": 82, "paddedTo": 96})
            self.assertEqual(fits["lm_head"]["wgrad"], {"status": "rotated"}, "the token count is known per step: padded then")
            stats = {(r["step"], r["layer"], r["gemm"]): r for r in records if r["type"] == "layerStats"}
            self.assertEqual(len(stats), 2 * 2 * 3, "steps 0 and 2, two layers, three GEMMs")
            dgrad = stats[(0, "lm_head", "dgrad")]["operands"]
            self.assertEqual([o["elements"] for o in dgrad], [33 * 96, 48 * 96], "the GEMM consumes the padded, rotated operands")
            self.assertEqual([o["blocks"] for o in dgrad], [33 * 3, 48 * 3])
            wgrad = stats[(2, "lm_head", "wgrad")]
            self.assertEqual([o["elements"] for o in wgrad["operands"]], [82 * 64, 48 * 64], "33 tokens padded to 64")
            self.assertTrue(0 < wgrad["wgradError"]["relErr"] < 1)

    def test_emulated_padded_gemms_keep_the_product_at_high_precision(self):
        # bf16 GEMMs with a padded rotation never quantize: outputs match the plain layer.
        torch.manual_seed(0)
        layer, reference = torch.nn.Linear(48, 82), torch.nn.Linear(48, 82)
        reference.load_state_dict(layer.state_dict())
        emulate(layer, default_gemms(gemm_config("fp32", "hadamard", 32)))
        x = torch.randn(5, 48)
        torch.testing.assert_close(layer(x), reference(x))

    def test_a_partial_mx_block_without_rotation(self):
        records = self.run_odd(rotation="none")
        fits = {layer["name"]: layer["rotationFit"] for layer in records[0]["layers"]}
        self.assertEqual(fits["lm_head"]["dgrad"], {"status": "none", "dim": 82})
        dgrad = next(r for r in records if r["type"] == "layerStats" and r["layer"] == "lm_head" and r["gemm"] == "dgrad")
        self.assertEqual([o["elements"] for o in dgrad["operands"]], [33 * 82, 48 * 82])
        self.assertEqual([o["blocks"] for o in dgrad["operands"]], [33 * 3, 48 * 3], "82 = 2 full blocks and a partial one")

    def test_skip_runs_misfits_unrotated_and_says_so(self):
        records = self.run_odd(misfit="skip", block=16)
        fits = {layer["name"]: layer["rotationFit"] for layer in records[0]["layers"]}
        self.assertEqual(fits["lm_head"]["dgrad"], {"status": "skipped", "dim": 82})
        self.assertEqual(fits["lm_head"]["fprop"], {"status": "rotated", "dim": 48})
        dgrad = next(r for r in records if r["type"] == "layerStats" and r["layer"] == "lm_head" and r["gemm"] == "dgrad")
        self.assertEqual(dgrad["operands"][0]["elements"], 33 * 82, "not padded")

    def test_refused_at_attach_naming_layer_gemm_and_dimension(self):
        with self.assertRaisesRegex(ValueError, r"layer 'mix' fprop: inFeatures reduction dimension 48 is not a multiple of the Hadamard block 32"):
            bridge_for(OddVocab(), self.out, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)), hadamard_misfit="error")
        with self.assertRaisesRegex(ValueError, r"no layer can honour fprop rotation hadamard with Hadamard block 32"):
            bridge_for(OddVocab(), self.out, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32)), hadamard_misfit="skip")

    def test_a_next_run_config_no_layer_can_honour_is_refused_at_start(self):
        bridge = bridge_for(OddVocab(), self.out, gemms=default_gemms(gemm_config("mxfp4", "none", 32)), hadamard_misfit="error")
        self.addCleanup(bridge.close)
        with self.assertRaisesRegex(ValueError, "layer 'mix' fprop"):
            bridge.start_run(config=dict(bridge.config, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32))))
        self.assertIsNone(bridge.run_id, "no run started")

    def test_fit_rule(self):
        self.assertEqual(fit("hadamard", 128, 50257), {"status": "padded", "dim": 50257, "paddedTo": 50304})
        self.assertEqual(fit("random-hadamard", 16, 4096), {"status": "rotated", "dim": 4096})
        with self.assertRaisesRegex(ValueError, "hadamard_misfit 'wrap'"):
            fit("hadamard", 16, 10, "wrap")


if __name__ == "__main__":
    unittest.main()

"""Frozen weights (LoRA's base layers, a frozen encoder) and inputs that need no gradient: only the
GEMMs autograd runs are measured, observed and emulated alike, and what is measured is unchanged."""
import tempfile
import unittest

import torch
import torch.utils.checkpoint

from mxscope_bridge import emulate

from tests.helpers import mx_gemms, one_stats_step


class LoRALinear(torch.nn.Module):
    """A frozen base layer plus a trainable rank-8 update, as PEFT's LoRA layers are built."""

    def __init__(self, n_in, n_out, rank=8):
        super().__init__()
        self.base = torch.nn.Linear(n_in, n_out)
        self.lora_a = torch.nn.Linear(n_in, rank, bias=False)
        self.lora_b = torch.nn.Linear(rank, n_out, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(x))


def lora_model(frozen=True):
    torch.manual_seed(0)
    model = torch.nn.Sequential(LoRALinear(64, 96), torch.nn.GELU(), LoRALinear(96, 64))
    for block in (model[0], model[2]):
        block.base.requires_grad_(not frozen)
    return model


class Checkpointed(torch.nn.Module):
    """Each LoRA block under activation checkpointing (its forward runs again in backward)."""

    def __init__(self, model, reentrant):
        super().__init__()
        self.model, self.reentrant = model, reentrant

    def forward(self, x):
        for block in self.model:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=self.reentrant)
        return x


def checkpoint_modes(test):
    """use_reentrant values to test: before torch 2.0 the bridge can see neither a checkpoint's
    recompute (autograd has no graph task id) nor its saved-tensor hooks (the GPU machines run these)."""
    if not hasattr(torch._C, "_current_graph_task_id") or not hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks"):
        test.skipTest("needs torch 2")
    return (False, True)


class Frozen(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-frozen-")

    def step_records(self, model, emulated=False, x_needs_grad=False):
        """The layerStats of one stats step on token-like data (the input needs no gradient)."""
        x = torch.randn(4, 32, 64, generator=torch.Generator().manual_seed(1)).requires_grad_(x_needs_grad)
        records = one_stats_step(self, model, self.out, lambda: model(x).pow(2).mean(), emulated)
        return {(r["layer"], r["gemm"]): r for r in records}

    def test_observed_only_the_gemms_that_run_are_measured_and_they_read_the_same(self):
        frozen = self.step_records(lora_model(frozen=True))
        self.assertEqual(set(frozen), {
            ("0.base", "fprop"),  # neither X nor W needs a gradient: no backward, Fprop measured in the forward
            ("0.lora_a", "fprop"), ("0.lora_a", "wgrad"),  # X is data: no Dgrad
            ("0.lora_b", "fprop"), ("0.lora_b", "dgrad"), ("0.lora_b", "wgrad"),
            ("2.base", "fprop"), ("2.base", "dgrad"),  # frozen W: no Wgrad
            ("2.lora_a", "fprop"), ("2.lora_a", "dgrad"), ("2.lora_a", "wgrad"),
            ("2.lora_b", "fprop"), ("2.lora_b", "dgrad"), ("2.lora_b", "wgrad")})
        trainable = self.step_records(lora_model(frozen=False))
        self.assertEqual(set(trainable) - set(frozen), {("0.base", "wgrad"), ("2.base", "wgrad")})
        for key, record in frozen.items():
            self.assertEqual(record["operands"], trainable[key]["operands"], f"{key}: the same operands read the same")

    def test_emulated_reports_what_observing_reports(self):
        observed = self.step_records(lora_model())
        emulated = self.step_records(lora_model(), emulated=True)
        self.assertEqual(set(emulated), set(observed))
        self.assertFalse(any(r.get("simulated") for r in emulated.values()))

    def test_emulated_skips_the_gradients_autograd_does_not_ask_for_and_keeps_the_others(self):
        grads = []
        for frozen in (True, False):
            model = lora_model(frozen)
            emulate(model, mx_gemms())
            x = torch.randn(4, 32, 64, generator=torch.Generator().manual_seed(1))
            model(x).pow(2).mean().backward()
            grads.append({name: p.grad for name, p in model.named_parameters()})
        with_frozen, without = grads
        self.assertIsNone(with_frozen["0.base.weight"])
        for name, grad in with_frozen.items():
            if grad is not None:
                torch.testing.assert_close(grad, without[name], rtol=0, atol=0, msg=name)

    def test_an_emulated_frozen_layer_keeps_no_input_for_backward(self):
        layer = torch.nn.Linear(64, 96).requires_grad_(False)
        emulate(torch.nn.Sequential(layer), mx_gemms())
        x = torch.randn(8, 64, requires_grad=True)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
            y = layer(x)
        self.assertEqual(saved, [(96, 64)], "W for Dgrad, and no X (no Wgrad)")
        y.sum().backward()
        self.assertEqual(x.grad.shape, x.shape)

    def test_checkpointing_measures_each_gemm_once_and_the_same(self):
        plain = self.step_records(lora_model(), x_needs_grad=True)
        self.assertIn(("0.base", "dgrad"), plain)
        for reentrant in checkpoint_modes(self):
            model = lora_model()
            checkpointed = self.step_records(Checkpointed(model, reentrant), x_needs_grad=True)
            self.assertEqual({(layer.removeprefix("model."), gemm): r["operands"] for (layer, gemm), r in checkpointed.items()},
                             {key: r["operands"] for key, r in plain.items()}, f"use_reentrant={reentrant}")

    def test_emulated_checkpointing_measures_fprop_once(self):
        plain = self.step_records(lora_model(), emulated=True, x_needs_grad=True)
        for reentrant in checkpoint_modes(self):
            checkpointed = self.step_records(Checkpointed(lora_model(), reentrant), emulated=True, x_needs_grad=True)
            self.assertEqual({(layer.removeprefix("model."), gemm): r["operands"] for (layer, gemm), r in checkpointed.items()},
                             {key: r["operands"] for key, r in plain.items()}, f"use_reentrant={reentrant}")

    def test_a_trainable_bias_on_a_frozen_weight(self):
        model = torch.nn.Sequential(torch.nn.Linear(64, 32))
        model[0].weight.requires_grad_(False)
        self.assertEqual(set(self.step_records(model)), {("0", "fprop")})
        self.assertEqual(set(self.step_records(model, emulated=True)), {("0", "fprop")})
        self.assertIsNone(model[0].weight.grad)
        self.assertEqual(model[0].bias.grad.shape, (32,))


if __name__ == "__main__":
    unittest.main()

"""Experts kept as 3-D parameters (transformers' MoE layout since v5) are observed and emulated one
linear layer per expert and parameter, like experts that are nn.Linear modules."""
import functools
import itertools
import math
import tempfile
import threading
import time
import types
import unittest
from unittest import mock

import torch
import torch.nn.functional as F

from mxscope_bridge import default_gemms, emulate, gemm_config, grouped_emulation, grouped_observe, layers, mx_ops, rotation
from mxscope_bridge.experts import _ExpertCalls, expert_slices
from mxscope_bridge.grouped_emulation import GroupedEmulatedExperts

from mxscope_bridge.runlog import compact

from tests.helpers import bridge_for, mx_gemms, read_log

DIM, HIDDEN, EXPERTS = 64, 96, 3


class StackedExperts(torch.nn.Module):
    """transformers' layout: gate_up_proj [E, 2I, H], down_proj [E, H, I], F.linear on each expert's slice."""

    def __init__(self):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(EXPERTS, 2 * HIDDEN, DIM) * 0.1)
        self.down_proj = torch.nn.Parameter(torch.randn(EXPERTS, DIM, HIDDEN) * 0.1)

    def forward(self, h, choice):
        out = torch.zeros_like(h)
        for e in range(EXPERTS):
            tokens = (choice == e).nonzero().squeeze(-1)
            gate, up = F.linear(h[tokens], self.gate_up_proj[e]).chunk(2, dim=-1)
            out = out.index_add(0, tokens, F.linear(F.silu(gate) * up, self.down_proj[e]))
        return out


class ModuleExperts(torch.nn.Module):
    """The same experts as nn.Linear modules (the layout before transformers v5)."""

    def __init__(self, stacked: StackedExperts):
        super().__init__()
        self.gate_up_proj = torch.nn.ModuleList(torch.nn.Linear(DIM, 2 * HIDDEN, bias=False) for _ in range(EXPERTS))
        self.down_proj = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, DIM, bias=False) for _ in range(EXPERTS))
        with torch.no_grad():
            for e in range(EXPERTS):
                self.gate_up_proj[e].weight.copy_(stacked.gate_up_proj[e])
                self.down_proj[e].weight.copy_(stacked.down_proj[e])

    def forward(self, h, choice):
        out = torch.zeros_like(h)
        for e in range(EXPERTS):
            tokens = (choice == e).nonzero().squeeze(-1)
            gate, up = self.gate_up_proj[e](h[tokens]).chunk(2, dim=-1)
            out = out.index_add(0, tokens, self.down_proj[e](F.silu(gate) * up))
        return out


def dispatching(experts_class):
    """How transformers' use_experts_implementation wraps an experts class: its forward picks an
    implementation by `config._experts_implementation` at every call, the eager one being the
    class's own forward."""
    eager = experts_class.forward

    def grouped(self, h, choice):  # one batched product, no F.linear per expert
        self.grouped_calls += 1
        w = torch.stack([self.gate_up_proj[e] for e in choice.tolist()])
        gate, up = torch.bmm(w, h.unsqueeze(-1)).squeeze(-1).chunk(2, dim=-1)
        w = torch.stack([self.down_proj[e] for e in choice.tolist()])
        return torch.bmm(w, (F.silu(gate) * up).unsqueeze(-1)).squeeze(-1)

    @functools.wraps(eager)
    def forward(self, *args, **kwargs):
        return (eager if self.config._experts_implementation == "eager" else grouped)(self, *args, **kwargs)

    experts_class.forward = forward
    return experts_class


@dispatching
class GroupedExperts(StackedExperts):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(_experts_implementation="grouped_mm")
        self.grouped_calls = 0


class Moe(torch.nn.Module):
    """Tokens go to expert (token index mod 2): expert 2 never gets one."""

    def __init__(self, experts):
        super().__init__()
        self.experts = experts

    def forward(self, x):
        h = x.reshape(-1, DIM)
        choice = torch.arange(h.shape[0], device=h.device) % 2
        return self.experts(h, choice).reshape(x.shape)


class MatmulExperts(torch.nn.Module):
    """GPT-OSS's layout: gate_up_proj [E, H, 2I] and down_proj [E, I, H], multiplied as x @ W[e]
    (e a 0-d tensor, as its loop over the experts hit gives it), the layout named by `is_transposed`."""

    is_transposed = True

    def __init__(self, stacked: StackedExperts):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(stacked.gate_up_proj.detach().transpose(1, 2).contiguous())
        self.down_proj = torch.nn.Parameter(stacked.down_proj.detach().transpose(1, 2).contiguous())

    def forward(self, h, choice):
        out = torch.zeros_like(h)
        for e in torch.arange(EXPERTS):
            tokens = (choice == e).nonzero().squeeze(-1)
            gate, up = (h[tokens] @ self.gate_up_proj[e]).chunk(2, dim=-1)
            out = out.index_add(0, tokens, torch.matmul(F.silu(gate) * up, self.down_proj[e]))
        return out


class GemmExperts(torch.nn.Module):
    """Aria's grouped GEMM fallback: one [E, in, out] weight, its in_features and out_features named."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.in_features, self.out_features = weight.shape[2], weight.shape[1]
        self.weight = torch.nn.Parameter(weight.detach().transpose(1, 2).contiguous())

    def forward(self, h, choice):
        out = h.new_zeros(h.shape[0], self.out_features)
        for e in range(EXPERTS):
            tokens = (choice == e).nonzero().squeeze(-1)
            out = out.index_add(0, tokens, torch.matmul(h[tokens], self.weight[e]))
        return out


class GemmMoeExperts(torch.nn.Module):
    def __init__(self, stacked: StackedExperts):
        super().__init__()
        self.gate_up = GemmExperts(stacked.gate_up_proj)
        self.down = GemmExperts(stacked.down_proj)

    def forward(self, h, choice):
        gate, up = self.gate_up(h, choice).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up, choice)


class BmmExperts(torch.nn.Module):
    """Llama 4's layout and product: [E, in, out] weights, every expert on every token (routing
    weighs the inputs), one torch.bmm over all experts; only `hidden_size` says which side is which."""

    def __init__(self, stacked: StackedExperts):
        super().__init__()
        self.hidden_size = DIM
        self.gate_up_proj = torch.nn.Parameter(stacked.gate_up_proj.detach().transpose(1, 2).contiguous())
        self.down_proj = torch.nn.Parameter(stacked.down_proj.detach().transpose(1, 2).contiguous())

    def forward(self, h, choice):
        routed = torch.stack([h * (choice == e).unsqueeze(-1) for e in range(EXPERTS)])
        gate, up = torch.bmm(routed, self.gate_up_proj).chunk(2, dim=-1)
        return torch.bmm(F.silu(gate) * up, self.down_proj).sum(0)


class ReferenceBmmExperts(StackedExperts):
    """BmmExperts' arithmetic with F.linear per expert, in the [out, in] layout (its class name says
    Experts: that is how experts modules are found)."""

    def forward(self, h, choice):
        out = torch.zeros_like(h)
        for e in range(EXPERTS):
            gate, up = F.linear(h * (choice == e).unsqueeze(-1), self.gate_up_proj[e]).chunk(2, dim=-1)
            out = out + F.linear(F.silu(gate) * up, self.down_proj[e])
        return out


class ExpertsMultipliedByMatmul(unittest.TestCase):
    """Experts kept [in, out] and multiplied with @, torch.matmul or torch.bmm (transformers' GPT-OSS,
    Aria, Llama 4) are layers with the [out, in] weight, observed and emulated like F.linear's."""

    def variants(self):
        """(kind, experts, the same experts multiplied by F.linear, their two parameters' names)."""
        def stacked(kind=StackedExperts):
            torch.manual_seed(0)
            return kind()
        return [("matmul", MatmulExperts(stacked()), stacked(), ("gate_up_proj", "down_proj")),
                ("gemm", GemmMoeExperts(stacked()), stacked(), ("gate_up.weight", "down.weight")),
                ("bmm", BmmExperts(stacked()), stacked(ReferenceBmmExperts), ("gate_up_proj", "down_proj"))]

    def test_layers_have_the_out_in_shape(self):
        for kind, experts, _, (gate_up, down) in self.variants():
            with self.subTest(kind):
                infos = {name: layers.layer_info(name, module, 4, 0) for name, module, _ in layers.observed_modules(Moe(experts))}
                self.assertEqual(len(infos), 2 * EXPERTS)
                self.assertEqual((infos[f"experts.{gate_up}.1"]["outFeatures"], infos[f"experts.{gate_up}.1"]["inFeatures"]), (2 * HIDDEN, DIM))
                self.assertEqual((infos[f"experts.{down}.1"]["outFeatures"], infos[f"experts.{down}.1"]["inFeatures"]), (DIM, HIDDEN))

    def test_the_layout_comes_from_the_module(self):
        from mxscope_bridge.experts import is_transposed

        def module(**attributes):
            return types.SimpleNamespace(**attributes)
        gate_up = torch.zeros(2, DIM, 2 * HIDDEN)  # [E, H, 2I]: [in, out] if H is the input
        down = torch.zeros(2, HIDDEN, DIM)         # [E, I, H]: [in, out] if H is the output
        self.assertTrue(is_transposed(module(is_transposed=True), "gate_up_proj", gate_up))
        self.assertFalse(is_transposed(module(is_transposed=False, hidden_size=DIM), "gate_up_proj", gate_up), "the module's flag wins")
        self.assertTrue(is_transposed(module(in_features=DIM, out_features=2 * HIDDEN), "weight", gate_up))
        self.assertFalse(is_transposed(module(in_features=2 * HIDDEN, out_features=DIM), "weight", gate_up))
        self.assertTrue(is_transposed(module(hidden_size=DIM), "gate_up_proj", gate_up))
        self.assertTrue(is_transposed(module(hidden_size=DIM), "down_proj", down))
        self.assertFalse(is_transposed(module(hidden_size=DIM), "gate_up_proj", gate_up.transpose(1, 2)))
        self.assertFalse(is_transposed(module(hidden_size=DIM), "down_proj", down.transpose(1, 2)))
        self.assertFalse(is_transposed(module(hidden_size=DIM), "up_proj", torch.zeros(2, DIM, DIM)), "square: nothing tells, [out, in]")
        self.assertFalse(is_transposed(module(), "w", gate_up), "no hint: [out, in], F.linear's layout")

    def test_emulated_like_experts_multiplied_by_f_linear(self):
        """A bmm by all experts runs as one grouped emulated product per parameter (equal groups; 40
        tokens each pad to whole blocks), the same values as one emulated GEMM per expert."""
        for shape in ((4, 16, DIM), (4, 10, DIM)):
            self.emulated_like_f_linear(torch.randn(*shape))

    def emulated_like_f_linear(self, x):
        for kind, experts, reference, (gate_up, down) in self.variants():
            with self.subTest(kind=kind, tokens=x.shape[0] * x.shape[1]):
                model, twin = Moe(experts), Moe(reference)
                plain = model(x)
                for m in (model, twin):
                    emulate(m, mx_gemms())
                with mock.patch.object(GroupedEmulatedExperts, "apply", side_effect=GroupedEmulatedExperts.apply) as grouped:
                    y = model(x)
                    y.pow(2).mean().backward()
                self.assertEqual(grouped.call_count, 2 if kind == "bmm" else 0)
                y_ref = twin(x)
                y_ref.pow(2).mean().backward()
                self.assertFalse(torch.equal(y, plain), "the experts' GEMMs ran in MXFP4")
                self.assertTrue(torch.equal(y, y_ref))
                params = {gate_up: reference.gate_up_proj, down: reference.down_proj}
                for name, ref_param in params.items():
                    param = dict(experts.named_parameters())[name]
                    self.assertTrue(torch.equal(param.grad, ref_param.grad.transpose(1, 2)), (kind, name))

    def test_observed_per_expert(self):
        for kind, experts, _, (gate_up, down) in self.variants():
            with self.subTest(kind):
                model = Moe(experts)
                bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-matmul-experts-"), stats_every=1)
                bridge.start_run()
                bridge.begin_step(0)
                model(torch.randn(4, 16, DIM)).pow(2).mean().backward()
                bridge.end_step(loss=0.0)
                run_dir = bridge.run_dir
                bridge.end_run()
                bridge.close()
                records = {(r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}
                for name in (gate_up, down):
                    grad = dict(experts.named_parameters())[name].grad
                    for e in range(EXPERTS):
                        layer = f"experts.{name}.{e}"
                        # the first projection's input needs no gradient: it has no Dgrad
                        self.assertEqual({g for (l, g) in records if l == layer}, {"fprop", "wgrad"} | ({"dgrad"} if name == down else set()), layer)
                        wgrad = records[(layer, "wgrad")]["wgradError"]
                        self.assertTrue(math.isclose(wgrad["gradNorm"], grad[e].norm().item(), rel_tol=1e-5, abs_tol=1e-12), layer)
                        w = records[(layer, "fprop")]["operands"][1]
                        self.assertEqual(w["elements"], grad[e].numel(), layer)


class GroupedMmExperts(StackedExperts):
    """transformers' grouped_mm implementation: the routed tokens sorted by expert, one
    torch._grouped_mm per parameter split at each expert's last row, back in token order."""

    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(_experts_implementation="grouped_mm")
        self.grouped_calls = 0

    def grouped(self, h, choice):
        self.grouped_calls += 1
        grouped_mm = getattr(F, "grouped_mm", None) or torch._grouped_mm  # as transformers 5.17 picks
        order = torch.argsort(choice, stable=True)
        offs = torch.cumsum(torch.bincount(choice, minlength=EXPERTS), 0, dtype=torch.int32)
        gate, up = grouped_mm(h[order], self.gate_up_proj.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
        y = grouped_mm(F.silu(gate) * up, self.down_proj.transpose(-2, -1), offs=offs)
        return torch.empty_like(y).index_copy(0, order, y)

    def forward(self, h, choice):
        return (StackedExperts.forward if self.config._experts_implementation == "eager" else GroupedMmExperts.grouped)(self, h, choice)


GroupedMmExperts.forward.__wrapped__ = StackedExperts.forward


def reference_grouped_mm(x, weights, offs):
    """A grouped GEMM as torch's kernels compute it: rows [offs[e-1], offs[e]) times weights[e],
    rows past the last offset left unwritten (NaN here); with 2-D weights (a Wgrad), group e is
    x's columns times weights' rows [offs[e-1], offs[e])."""
    if weights.dim() == 2:
        REFERENCE_CALLS.append("2-D")
        out, start = torch.empty(len(offs), x.shape[0], weights.shape[1]), 0
        for e, end in enumerate(offs.tolist()):
            out[e] = x[:, start:end] @ weights[start:end]
            start = end
        return out
    out = torch.full((x.shape[0], weights.shape[2]), float("nan"))
    start = 0
    for e, end in enumerate(offs.tolist()):
        out[start:end] = x[start:end] @ weights[e]
        start = end
    return out


#: The kinds of reference_grouped_mm calls made ("2-D": a Wgrad grouped over the tokens)
REFERENCE_CALLS = []


def grouped_mlp(calls: _ExpertCalls, h: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """The experts' MLP of routed rows h (sorted by expert, split at offs) through the reference grouped
    product, as transformers' grouped_mm experts run it, under `calls` (the bridge's split or grouped way)."""
    gate, up = calls._grouped(reference_grouped_mm, (h, gate_up), {"offs": offs}).chunk(2, dim=-1)
    return calls._grouped(reference_grouped_mm, (F.silu(gate) * up, down), {"offs": offs})


class GroupedGemmSplit(unittest.TestCase):
    """How a grouped GEMM by experts is split (on CPU, with a reference grouped product): each busy
    expert's rows are its own product, through its hooks; the rest are the grouped GEMM's."""

    def setUp(self):
        torch.manual_seed(0)
        self.stacked = StackedExperts()
        self.slices = dict(expert_slices("experts", self.stacked))
        self.x = torch.randn(10, DIM)
        self.offs = torch.tensor([3, 7, 7])  # expert 2 gets no row; rows 7-9 are past the last expert's
        self.weights = self.stacked.gate_up_proj.transpose(-2, -1)

    def split(self, busy):
        seen = []
        for e in busy:
            self.slices[f"experts.gate_up_proj.{e}"].register_forward_hook(lambda m, inputs, out, e=e: seen.append((e, inputs[0].shape[0], tuple(out.shape))))
        calls = _ExpertCalls(list(self.slices.values()))
        y = calls._grouped(reference_grouped_mm, (self.x, self.weights), {"offs": self.offs})
        return y, seen, calls.split

    def test_a_busy_expert_gets_its_own_product(self):
        y, seen, split = self.split(busy=[1])
        want = reference_grouped_mm(self.x, self.weights, self.offs)
        self.assertEqual(seen, [(1, 4, (4, 2 * HIDDEN))])
        self.assertEqual(split, 1)
        self.assertTrue(torch.equal(y[:7], want[:7]))
        self.assertTrue(torch.isnan(y[7:]).all(), "rows past the last expert's stay as the kernel left them")

    def test_gradients_flow_through_each_row_once(self):
        """Expert 1's rows of the grouped product are replaced: its gradient comes from its own product alone."""
        def grads(split: bool):
            self.stacked.zero_grad()
            x = self.x.clone().requires_grad_()
            if split:
                y = _ExpertCalls(list(self.slices.values()))._grouped(reference_grouped_mm, (x, self.weights), {"offs": self.offs})
            else:
                y = reference_grouped_mm(x, self.weights, self.offs)
            y[:7].pow(2).sum().backward()
            return x.grad, self.stacked.gate_up_proj.grad.clone()
        want_x, want_w = grads(split=False)
        self.slices["experts.gate_up_proj.1"].register_forward_hook(lambda m, inputs, out: None)
        got_x, got_w = grads(split=True)
        self.assertTrue(torch.allclose(got_x, want_x, rtol=1e-6, atol=1e-7))
        self.assertTrue(torch.allclose(got_w, want_w, rtol=1e-6, atol=1e-7))

    def test_every_expert_busy_runs_no_grouped_gemm(self):
        y, seen, _ = self.split(busy=[0, 1, 2])
        want = reference_grouped_mm(self.x, self.weights, self.offs)
        self.assertEqual(seen, [(0, 3, (3, 2 * HIDDEN)), (1, 4, (4, 2 * HIDDEN))], "expert 2 has no row: no GEMM, as in the eager loop")
        self.assertTrue(torch.equal(y[:7], want[:7]))
        self.assertTrue(torch.equal(y[7:], torch.zeros(3, 2 * HIDDEN)))

    def test_experts_kept_in_out_are_split_too(self):
        transposed = MatmulExperts(self.stacked)  # [E, in, out], multiplied as given (transformers' is_transposed)
        slices = dict(expert_slices("experts", transposed))
        seen = []
        slices["experts.gate_up_proj.0"].register_forward_hook(lambda m, inputs, out: seen.append(inputs[0].shape[0]))
        calls = _ExpertCalls(list(slices.values()))
        y = calls._grouped(reference_grouped_mm, (self.x, transposed.gate_up_proj), {"offs": self.offs})
        want = reference_grouped_mm(self.x, self.weights, self.offs)
        self.assertEqual(seen, [3])
        self.assertTrue(torch.equal(y[:7], want[:7]), "the same experts, the same products")

    def test_other_grouped_products_are_not_split(self):
        calls = _ExpertCalls(list(self.slices.values()))
        other = torch.randn(3, DIM, 2 * HIDDEN)
        self.assertIsNone(calls._grouped(reference_grouped_mm, (self.x, other), {"offs": self.offs}), "not a registered parameter")
        self.assertIsNone(calls._grouped(reference_grouped_mm, (self.x, self.weights), {"offs": self.offs, "bias": torch.zeros(3, 2 * HIDDEN)}))
        self.assertIsNone(calls._grouped(reference_grouped_mm, (self.x, self.weights), {"offs": torch.tensor([3, 7, 11])}), "offsets past the rows")
        self.assertEqual(calls.split, 0)


class GroupedEmulation(unittest.TestCase):
    """Emulated experts of a grouped GEMM run as one grouped emulated product per parameter (on CPU,
    with the reference grouped product): the values and gradients of one emulated GEMM per expert."""

    def outputs(self, gemms, grouped: bool, rows=40, in_out=False, input_grad=True, hooked=False):
        """in_out: experts kept [E, in, out] (GPT-OSS's layout), the grouped GEMM taking the parameter
        itself; input_grad False: the model's input needs no gradient (no Dgrad into it); hooked:
        expert 1 of gate_up_proj has a forward hook (a capture step measuring it), seen in self.seen."""
        torch.manual_seed(0)
        model = Moe(MatmulExperts(StackedExperts()) if in_out else StackedExperts())
        emulate(model, gemms)
        generator = torch.Generator().manual_seed(1)
        h = torch.randn(rows, DIM, generator=generator).requires_grad_(input_grad)
        choice = (torch.rand(rows, generator=generator) < 0.4).long()  # experts 0 and 1, 26 and 14 tokens: no whole blocks; 2: none
        experts = model.experts
        layouts = self.layouts = []
        self.seen = []
        if hooked:
            experts._mxscope_experts["gate_up_proj"][1].register_forward_hook(lambda m, inputs, out: self.seen.append(tuple(out.shape)))
        if grouped:
            order = torch.sort(choice, stable=True).indices
            offs = torch.cumsum(torch.bincount(choice, minlength=EXPERTS), 0, dtype=torch.int32)
            calls = _ExpertCalls([s for group in experts._mxscope_experts.values() for s in group])
            as_given = (lambda w: w) if in_out else (lambda w: w.transpose(-2, -1))
            gate_up, down = as_given(experts.gate_up_proj), as_given(experts.down_proj)
            for view in (gate_up, down):
                if view.requires_grad and not in_out:  # the gradient autograd hands the parameter: laid out as it is
                    view.register_hook(lambda g: layouts.append(g.transpose(-2, -1).is_contiguous()))
            y_sorted = grouped_mlp(calls, h[order], gate_up, down, offs)
            y = torch.empty_like(y_sorted).index_copy(0, order, y_sorted)
        else:
            y = experts(h, choice)
        REFERENCE_CALLS.clear()
        y.pow(2).sum().backward()
        return y.detach(), h.grad, experts.gate_up_proj.grad, experts.down_proj.grad, list(REFERENCE_CALLS)

    def assert_same(self, gemms, grouped_wgrads: int, in_out=False, input_grad=True, hooked=False):
        want = self.outputs(gemms, grouped=False, in_out=in_out, input_grad=input_grad, hooked=hooked)
        got = self.outputs(gemms, grouped=True, in_out=in_out, input_grad=input_grad, hooked=hooked)
        self.assertEqual(got[4], ["2-D"] * grouped_wgrads, "Wgrads as grouped products over the tokens")
        self.assertTrue(torch.equal(got[0], want[0]), "Fprop")
        self.assertTrue(got[1] is None if not input_grad else torch.equal(got[1], want[1]), "Dgrad")
        for name, g, w in zip(("gate_up_proj", "down_proj"), got[2:4], want[2:4]):
            self.assertTrue(torch.allclose(g, w, rtol=1e-5, atol=1e-7), f"Wgrad of {name}: {(g - w).abs().max().item()}")
        return got, want

    def test_mxfp4_with_a_hadamard_block_matches_one_gemm_per_expert(self):
        got, _ = self.assert_same(mx_gemms("hadamard"), grouped_wgrads=2)
        self.assertEqual(self.layouts, [True, True], "Wgrads made in the parameters' [E, out, in] layout")
        plain = self.outputs({kind: gemm_config("bf16") for kind in ("fprop", "dgrad", "wgrad")}, grouped=True)
        self.assertFalse(torch.equal(got[0], plain[0]), "the products ran in MXFP4")

    def test_an_input_without_gradient_gets_its_wgrads_alone(self):
        self.assert_same(mx_gemms("hadamard"), grouped_wgrads=2, input_grad=False)
        self.assertEqual(self.layouts, [True, True])

    def test_an_expert_measured_this_step_gets_its_own_gemms_beside_the_grouped_product(self):
        """A capture step measuring one expert (its hooks): that expert's rows come from its own emulated
        GEMMs, which report themselves, and its gradients from them alone; the rest stay grouped."""
        self.assert_same(mx_gemms("hadamard"), grouped_wgrads=2, hooked=True)
        self.assertEqual(self.seen, [(14, 2 * HIDDEN)], "expert 1 of gate_up_proj (14 tokens), through its hook")

    def test_experts_kept_in_out(self):
        self.assert_same(mx_gemms("hadamard"), grouped_wgrads=2, in_out=True)

    def test_mxfp4_without_rotation_and_a_wgrad_in_bf16(self):
        self.assert_same(mx_gemms("none"), grouped_wgrads=2)
        gemms = dict(mx_gemms("hadamard"), wgrad=gemm_config("bf16"))
        self.assert_same(gemms, grouped_wgrads=2)

    def test_a_hadamard_block_of_16_pads_each_expert_to_whole_mx_blocks(self):
        self.assert_same(default_gemms(gemm_config("mxfp4", "hadamard", 16)), grouped_wgrads=2)

    def test_rows_past_the_last_expert_get_zeros_and_no_gradient(self):
        model = Moe(StackedExperts())
        emulate(model, mx_gemms("hadamard"))
        slices = [s for group in model.experts._mxscope_experts.values() for s in group]
        x = torch.randn(10, DIM).requires_grad_()
        y = _ExpertCalls(slices)._grouped(reference_grouped_mm, (x, model.experts.gate_up_proj.transpose(-2, -1)), {"offs": torch.tensor([3, 7, 7])})
        self.assertTrue(torch.equal(y[7:], torch.zeros(3, 2 * HIDDEN)), "transformers' expert-parallel sentinels")
        y.pow(2).sum().backward()
        self.assertTrue(torch.equal(x.grad[7:], torch.zeros(3, DIM)))
        self.assertFalse(torch.equal(x.grad[:7], torch.zeros(7, DIM)))

    def test_a_hadamard_block_that_does_not_divide_a_dimension_pads_it(self):
        """H64 on the down projection's 96 inputs: its Fprop and Dgrad weights are padded to 128 as one GEMM per expert pads them."""
        for in_out in (False, True):
            self.assert_same(default_gemms(gemm_config("mxfp4", "hadamard", 64)), grouped_wgrads=2, in_out=in_out)

    def test_rounding_and_signs_drawn_for_the_grouped_call(self):
        """Stochastic rounding and random Hadamard signs keyed to the grouped call's operands: other bits
        than one GEMM per expert draws, the same again for the same operands, errors of the same size
        (each expert's two operands share the signs, so the rotation cancels)."""
        exact = self.outputs(default_gemms(gemm_config("bf16")), grouped=True)
        nearest = self.outputs(mx_gemms("hadamard"), grouped=True)

        def error(outputs, i):
            return ((outputs[i] - exact[i]).norm() / exact[i].norm()).item()
        for gemm in (gemm_config("mxfp4", "hadamard", 32, rounding="stochastic"), gemm_config("mxfp4", "random-hadamard", 32)):
            gemms = default_gemms(gemm)
            got = self.outputs(gemms, grouped=True)
            self.assertEqual(got[4], ["2-D"] * 2, f"{gemm}: Wgrads as grouped products")
            again = self.outputs(gemms, grouped=True)
            for i in range(4):
                self.assertTrue(torch.equal(got[i], again[i]), f"{gemm}: output {i} drawn again the same")
            self.assertFalse(torch.equal(got[0], nearest[0]), f"{gemm}: the draws change the values")
            by_expert = self.outputs(gemms, grouped=False)
            for i in range(4):
                ratio = error(got, i) / error(by_expert, i)
                self.assertTrue(0.6 < ratio < 1.6, f"{gemm}: output {i}'s error {error(got, i):.4f} against {error(by_expert, i):.4f} expert by expert")

    def test_fixed_sign_hadamard_runs_expert_by_expert(self):
        self.assert_same(dict(mx_gemms("hadamard"), wgrad=gemm_config("mxfp4", "fixed-sign-hadamard", 32)), grouped_wgrads=0)


class Float32Sums(unittest.TestCase):
    def test_each_grouped_gemm_is_asked_once_per_dtype(self):
        """Whether a grouped GEMM gives float32 sums is learnt per GEMM: one that does not (torch's, for
        bf16) after one that does (a bmm of equal groups) is asked, not taken to."""
        def without_out_dtype(a, b, offs):
            asked.append("without")
            return reference_grouped_mm(a.float(), b.float(), offs)

        def with_out_dtype(a, b, offs, out_dtype=None):
            asked.append("with")
            return reference_grouped_mm(a.float(), b.float(), offs).to(out_dtype)

        asked = []
        a, b, offs = torch.randn(4, 6).bfloat16(), torch.randn(6, 5).bfloat16(), torch.tensor([2, 6])
        with mock.patch.dict(grouped_emulation._FLOAT32_SUMS, clear=True):
            self.assertEqual(grouped_emulation.float32_sums(with_out_dtype, a, b, offs).dtype, torch.float32)
            self.assertIsNone(grouped_emulation.float32_sums(without_out_dtype, a, b, offs))
            self.assertIsNone(grouped_emulation.float32_sums(without_out_dtype, a, b, offs))
            self.assertIsNotNone(grouped_emulation.float32_sums(with_out_dtype, a, b, offs))
        self.assertEqual(asked, ["with", "with"], "the one without float32 sums is not called: it refuses the keyword, once")


def assert_same_records(test, got: dict, want: dict) -> None:
    """The same layerStats records: counts equal, float fields within float rounding (sums in another order)."""
    test.assertEqual(sorted(got), sorted(want))
    for key, record in want.items():
        mine = got[key]
        for operand, theirs in zip(mine["operands"], record["operands"]):
            for field, value in theirs.items():
                if isinstance(value, float):
                    test.assertTrue(math.isclose(operand[field], value, rel_tol=1e-9, abs_tol=1e-12), (key, field))
                else:
                    test.assertEqual(operand[field], value, (key, field))
        if "wgradError" in record:
            for field, value in record["wgradError"].items():
                if isinstance(value, list):
                    test.assertTrue(all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9) for a, b in zip(mine["wgradError"][field], value)), (key, field))
                elif isinstance(value, float):
                    test.assertTrue(math.isclose(mine["wgradError"][field], value, rel_tol=1e-5, abs_tol=1e-9), (key, field, mine["wgradError"][field], value))
                else:
                    test.assertEqual(mine["wgradError"][field], value, (key, field))


class GroupedObservation(unittest.TestCase):
    """Observed experts of a grouped GEMM are measured as a group on capture steps (on CPU, with the
    reference grouped product): the trainer's grouped GEMM runs unsplit, and every record is the one
    measuring expert by expert gives."""

    def run_steps(self, grouped: bool, steps=3, gemms=None, change_weights=False, every_expert=False, **bridge_kwargs):
        """{(step, layer, gemm): layerStats record} of `steps` steps at statsEvery 2 (steps 0 and 2
        measure, step 1 keeps E for step 2's lag-1), and the grouped Wgrad products of each step.
        change_weights: the weights are changed in place after backward, before the backward worker
        measures anything (an optimizer step before end_step). every_expert: tokens reach expert 2 too."""
        torch.manual_seed(0)
        model = Moe(StackedExperts())
        experts = model.experts
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-observe-"), gemms=gemms, stats_every=2, **bridge_kwargs)
        self.addCleanup(bridge.close)
        slices = [s for _, s in expert_slices("experts", experts)]
        bridge.start_run()
        generator = torch.Generator().manual_seed(1)
        products = []
        measure = grouped_observe.observe_grouped if grouped else (lambda *args: None)
        released, worker_part = threading.Event(), grouped_observe._measure

        def late(*args):
            released.wait(10)
            worker_part(*args)

        with mock.patch.object(grouped_observe, "observe_grouped", side_effect=measure), \
                mock.patch.object(grouped_observe, "_measure", late if change_weights else worker_part):
            for step in range(steps):
                bridge.begin_step(step)
                h = torch.randn(40, DIM, generator=generator).requires_grad_()
                choice = (torch.rand(40, generator=generator) < 0.4).long()  # experts 0 and 1, no whole blocks; 2: none
                if every_expert:
                    choice = torch.randint(0, EXPERTS, (40,), generator=generator)
                order = torch.sort(choice, stable=True).indices
                offs = torch.cumsum(torch.bincount(choice, minlength=EXPERTS), 0, dtype=torch.int32)
                calls = _ExpertCalls(slices)
                REFERENCE_CALLS.clear()
                y = grouped_mlp(calls, h[order], experts.gate_up_proj.transpose(-2, -1), experts.down_proj.transpose(-2, -1), offs)
                y.pow(2).sum().backward()
                if change_weights:
                    with torch.no_grad():
                        experts.gate_up_proj.mul_(4)
                        experts.down_proj.mul_(4)
                    released.set()
                bridge.end_step(loss=0.0)
                products.append(REFERENCE_CALLS.count("2-D"))
        run_dir = bridge.run_dir
        bridge.end_run()
        return {(r["step"], r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}, products

    def test_every_record_is_the_expert_by_expert_ones(self):
        want, split = self.run_steps(grouped=False)
        got, grouped = self.run_steps(grouped=True)
        self.assertEqual(split, [0, 0, 0], "expert by expert: no grouped Wgrad product")
        self.assertEqual(grouped, [4, 4, 4], "measured as a group: ∇Ŵ and ∇W of both parameters' experts, on each capture step")
        self.assertEqual({layer for (_, layer, _) in got}, {f"experts.{p}.{e}" for p in ("gate_up_proj", "down_proj") for e in (0, 1)},
                         "expert 2 gets no token: no GEMM, no record")
        self.assertIsNotNone(got[(2, "experts.down_proj.1", "wgrad")]["wgradError"]["lag1Cos"])
        assert_same_records(self, got, want)

    def test_a_layer_group_of_experts(self):
        """With layer groups, a capture step measures some of a grouped call's experts, not always next
        to each other: those alone, from the unsplit call."""
        want, _ = self.run_steps(grouped=False, every_expert=True, stats_layer_groups=2)
        got, grouped = self.run_steps(grouped=True, every_expert=True, stats_layer_groups=2)
        self.assertEqual(grouped, [4, 4, 4])
        self.assertEqual({layer for (step, layer, _) in got if step == 0}, {"experts.gate_up_proj.0", "experts.gate_up_proj.2", "experts.down_proj.1"})
        self.assertEqual({layer for (step, layer, _) in got if step == 2}, {"experts.gate_up_proj.1", "experts.down_proj.0", "experts.down_proj.2"})
        self.assertIsNotNone(got[(2, "experts.gate_up_proj.1", "wgrad")]["wgradError"]["lag1Cos"])
        assert_same_records(self, got, want)

    def test_experts_past_the_lag1_budget_report_no_lag1(self):
        """E_{t−1} within Bridge(lag1_host_bytes): one hand-over for a call's experts keeps those that
        fit (down_proj's two, stored first, and gate_up_proj's first) and refuses the rest whole."""
        want, _ = self.run_steps(grouped=True)
        budget = 2 * (DIM * HIDDEN * 4) + 2 * HIDDEN * DIM * 4
        got, _ = self.run_steps(grouped=True, lag1_host_bytes=budget)
        self.assertEqual(sorted(got), sorted(want))
        refused = (2, "experts.gate_up_proj.1", "wgrad")
        for key, record in got.items():
            theirs = want[key]
            if key == refused:
                self.assertIsNotNone(theirs["wgradError"]["lag1Cos"])
                self.assertEqual((record["wgradError"]["lag1Cos"], record["wgradError"]["sketchPrev"]), (None, None))
                record = {**record, "wgradError": {k: v for k, v in record["wgradError"].items() if k not in ("lag1Cos", "sketchPrev")}}
                theirs = {**theirs, "wgradError": {k: v for k, v in theirs["wgradError"].items() if k not in ("lag1Cos", "sketchPrev")}}
            self.assertEqual({**record, "runId": None}, {**theirs, "runId": None}, key)

    def test_out_of_device_memory_measuring_a_call_drops_that_step_alone(self):
        want, _ = self.run_steps(grouped=True)
        errors, raised = grouped_observe._wgrad_errors, []

        def failing(*args):
            if not raised:
                raised.append(True)
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB")
            return errors(*args)

        with mock.patch.object(grouped_observe, "_wgrad_errors", failing):
            got, _ = self.run_steps(grouped=True)
        self.assertEqual({step for step, _, _ in got}, {2}, "step 0's records dropped")
        self.assertEqual({key: {**record, "runId": None} for key, record in got.items()},
                         {key: {**record, "runId": None} for key, record in want.items() if key[0] == 2})

    def test_one_call_at_a_time_waits_for_the_backward_worker(self):
        """A grouped call's work holds all its experts' X and ∇Y: the next call's waits until it has run."""
        from mxscope_bridge.backward_worker import BackwardWorker
        waiting, submit, measure = [], BackwardWorker.submit, grouped_observe._measure

        def watched(worker, device, work, where, measured, *args):
            if measured is slow:  # the work is the capture's measure of it
                waiting.append(worker._queue.unfinished_tasks)
            return submit(worker, device, work, where, measured, *args)

        def slow(*args):
            time.sleep(0.2)
            measure(*args)

        with mock.patch.object(BackwardWorker, "submit", watched), mock.patch.object(grouped_observe, "_measure", slow):
            self.run_steps(grouped=True, steps=1)
        self.assertEqual(waiting, [0, 0], "nothing else queued or running when a call's work is handed over")

    def test_observing_leaves_the_trainers_products_as_they_are(self):
        """Measured as a group, the experts' outputs and gradients on a capture step are the bits of
        the trainer's own grouped GEMM, as without the bridge."""
        def step(observed: bool):
            torch.manual_seed(0)
            model = Moe(StackedExperts())
            experts = model.experts
            slices = [s for _, s in expert_slices("experts", experts)]
            if observed:
                bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-bits-"), stats_every=2)
                self.addCleanup(bridge.close)
                bridge.start_run()
                bridge.begin_step(0)
            generator = torch.Generator().manual_seed(1)
            h = torch.randn(40, DIM, generator=generator).requires_grad_()
            offs = torch.tensor([16, 29, 40], dtype=torch.int32)
            calls = _ExpertCalls(slices)
            y = grouped_mlp(calls, h, experts.gate_up_proj.transpose(-2, -1), experts.down_proj.transpose(-2, -1), offs)
            REFERENCE_CALLS.clear()
            y.pow(2).sum().backward()
            if observed:
                bridge.end_step(loss=0.0)
                self.assertEqual(REFERENCE_CALLS.count("2-D"), 4, "the experts were measured, as a group")
                bridge.end_run()
            return y.detach(), h.grad, experts.gate_up_proj.grad, experts.down_proj.grad
        for got, want, what in zip(step(observed=True), step(observed=False), ("outputs", "input gradient", "gate_up_proj's", "down_proj's")):
            self.assertTrue(torch.equal(got, want), what)

    def test_each_operand_of_all_experts_at_once(self):
        """On the GPU each operand's stats of all of a call's experts take one launch
        (mx_ops.segment_stats, held to a launch per expert by the GPU tests). Here a stand-in gives
        each view its own stats, so what is left to check is how they reach each expert's records."""
        sets = []

        def one_by_one(views, gemm, r):
            sets.append(len(views))
            return [mx_ops.quantize_operand(view, gemm, r, None, "segment", None, with_stats=True)[1] for view in views]
        want, _ = self.run_steps(grouped=False)
        with mock.patch.object(mx_ops, "segment_stats", one_by_one):
            got, _ = self.run_steps(grouped=True)
        self.assertEqual(sets, [2] * (2 * 2 * 6), "two stats steps, two calls, six operands, two experts each")
        assert_same_records(self, got, want)

    def test_products_where_the_grouped_gemm_gives_no_float32_sums(self):
        """torch's grouped GEMM gives no float32 output of bf16 operands (an H200, torch 2.11): each
        expert's products then come from its slot of the batch's spread operands (one bmm on CUDA),
        and the records stay the expert-by-expert ones."""
        want, _ = self.run_steps(grouped=False)
        with mock.patch.object(grouped_observe, "float32_sums", return_value=None):
            got, grouped = self.run_steps(grouped=True)
        self.assertEqual(grouped, [0, 0, 0], "no grouped Wgrad product")
        self.assertIsNotNone(got[(2, "experts.down_proj.1", "wgrad")]["wgradError"]["lag1Cos"])
        assert_same_records(self, got, want)

    def test_weights_are_measured_before_an_optimizer_step_changes_them(self):
        want, _ = self.run_steps(grouped=True, steps=1)
        got, _ = self.run_steps(grouped=True, steps=1, change_weights=True)
        assert_same_records(self, got, want)

    def test_without_rotation(self):
        want, _ = self.run_steps(grouped=False, gemms=mx_gemms("none"))
        got, grouped = self.run_steps(grouped=True, gemms=mx_gemms("none"))
        self.assertEqual(grouped, [4, 4, 4])
        assert_same_records(self, got, want)

    def test_random_bits_and_sampled_rows_are_measured_expert_by_expert(self):
        for gemms, kwargs in ((default_gemms(gemm_config("mxfp4", "hadamard", 32, rounding="stochastic")), {}),
                              (default_gemms(gemm_config("mxfp4", "random-hadamard", 32)), {}),
                              (mx_gemms(), {"wgrad_error_row_stride": 2})):
            with self.subTest(gemms=gemms["wgrad"], **kwargs):
                _, grouped = self.run_steps(grouped=True, steps=1, gemms=gemms, **kwargs)
                self.assertEqual(grouped, [0])


class ExpertBatches(unittest.TestCase):
    """grouped_observe._batches: the experts' Wgrad error runs a batch at a time, each batch's spread
    operands and float32 products within BATCH_BYTES, so the worker's memory does not grow with the
    experts of a call."""

    @staticmethod
    def batch_bytes(batch, out_features, in_features, block):
        slot = max(rotation.padded_length(end - start, block) for _, start, end in batch)
        return len(batch) * (slot * (out_features + in_features) * 2 * 3 + out_features * in_features * 4 * 3)

    def test_every_expert_once_in_order_and_each_batch_within_the_bound(self):
        generator = torch.Generator().manual_seed(3)
        out_features, in_features, block = 1536, 2048, 32  # a Qwen3-30B-A3B up projection
        counts = torch.randint(0, 1500, (128,), generator=generator).tolist()
        ends = list(itertools.accumulate(counts))
        parts = [(f"e.{i}", end - count, end) for i, (count, end) in enumerate(zip(counts, ends))]
        batches = grouped_observe._batches(parts, out_features, in_features, block)
        self.assertEqual([part for batch in batches for part in batch], parts, "every expert once, in order")
        for batch in batches:
            self.assertLessEqual(self.batch_bytes(batch, out_features, in_features, block), grouped_observe.BATCH_BYTES)
        # Full batches: adding the next expert would have passed the bound.
        for batch, following in zip(batches, batches[1:]):
            self.assertGreater(self.batch_bytes(batch + following[:1], out_features, in_features, block), grouped_observe.BATCH_BYTES)

    def test_an_expert_larger_than_the_bound_is_a_batch_of_its_own(self):
        huge = grouped_observe.BATCH_BYTES  # tokens: its spread copies alone pass the bound
        parts = [("a", 0, 10), ("b", 10, 10 + huge), ("c", 10 + huge, 20 + huge)]
        self.assertEqual(grouped_observe._batches(parts, 64, 64, 32), [[parts[0]], [parts[1]], [parts[2]]])


def assert_within_last_bit(test, got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """bf16 products of the same MXFP4 operands, summed in another order: equal but for a last bit here
    and there (a grouped GEMM against one GEMM per expert)."""
    ulp = want.float().abs() * 2.0 ** -7 + 1e-30
    test.assertTrue(((got.float() - want.float()).abs() <= ulp).all(), f"{what}: more than a last bit apart")
    test.assertLessEqual((got != want).float().mean().item(), 0.01, f"{what}: most elements are the same bits")


@unittest.skipUnless(hasattr(torch, "_grouped_mm") and torch.cuda.is_available(), "torch._grouped_mm on CUDA (torch 2.9 and later, a GPU)")
class ExpertsMultipliedByGroupedMm(unittest.TestCase):
    """transformers' grouped_mm experts keep their one grouped GEMM per parameter while observed or
    emulated: the bridge splits it by expert, each part its expert's GEMM."""

    def models(self):
        """The grouped experts and the same experts run eager (F.linear per expert), bf16 on the GPU."""
        torch.manual_seed(0)
        grouped = GroupedMmExperts()
        torch.manual_seed(0)
        eager = StackedExperts()
        return Moe(grouped).cuda().bfloat16(), Moe(eager).cuda().bfloat16()

    def test_emulated_like_the_eager_experts(self):
        model, twin = self.models()
        x = torch.randn(4, 16, DIM, device="cuda", dtype=torch.bfloat16)
        plain = model(x)
        for m in (model, twin):
            emulate(m, mx_gemms())
        calls = model.experts.grouped_calls
        with mock.patch.object(GroupedEmulatedExperts, "apply", side_effect=GroupedEmulatedExperts.apply) as grouped:
            y, y_ref = model(x), twin(x)
        self.assertEqual(model.experts.grouped_calls, calls + 1, "the grouped implementation ran")
        y.float().pow(2).mean().backward()
        y_ref.float().pow(2).mean().backward()
        self.assertFalse(torch.equal(y, plain), "the experts' GEMMs ran in MXFP4")
        self.assertEqual(grouped.call_count, 2, "one grouped emulated product per parameter")
        assert_within_last_bit(self, y, y_ref, "Fprop")
        for name in ("gate_up_proj", "down_proj"):
            assert_within_last_bit(self, getattr(model.experts, name).grad, getattr(twin.experts, name).grad, name)

    def test_draws_of_a_grouped_call_are_the_torch_paths(self):
        """Stochastic rounding and random Hadamard signs of a grouped emulated call: the kernels draw the
        bits the torch path draws on the CPU (products within a last bit: another order of sums)."""
        for gemm in (gemm_config("mxfp4", "hadamard", 32, rounding="stochastic"), gemm_config("mxfp4", "random-hadamard", 32)):
            outputs = []
            for device in ("cuda", "cpu"):
                torch.manual_seed(0)
                model = Moe(StackedExperts()).to(device, torch.bfloat16)
                emulate(model, default_gemms(gemm))
                experts = model.experts
                slices = [s for group in experts._mxscope_experts.values() for s in group]
                x = torch.randn(40, DIM, generator=torch.Generator().manual_seed(2)).to(device, torch.bfloat16).requires_grad_()
                offs = torch.tensor([17, 40, 40], dtype=torch.int32, device=device)
                grouped_mm = (getattr(F, "grouped_mm", None) or torch._grouped_mm) if device == "cuda" else reference_grouped_mm
                y = _ExpertCalls(slices)._grouped(grouped_mm, (x, experts.gate_up_proj.transpose(-2, -1)), {"offs": offs})
                y.float().pow(2).sum().backward()
                outputs.append((y.detach().float().cpu(), x.grad.float().cpu(), experts.gate_up_proj.grad.float().cpu()))
            for got, want, what in zip(outputs[0], outputs[1], ("Fprop", "Dgrad", "Wgrad")):
                assert_within_last_bit(self, got, want, f"{gemm['rounding']}, {gemm['rotation']}: {what}")

    def test_observed_per_expert(self):
        model, _ = self.models()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-mm-"), stats_every=1)
        bridge.start_run()
        bridge.begin_step(0)
        model(torch.randn(4, 16, DIM, device="cuda", dtype=torch.bfloat16)).float().pow(2).mean().backward()
        bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        self.assertEqual(model.experts.grouped_calls, 1, "the trainer's implementation ran while observed")
        records = {(r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}
        for name in ("gate_up_proj", "down_proj"):
            grad = getattr(model.experts, name).grad
            for e in range(2):  # expert 2 gets no token: no GEMM, as in the eager loop
                layer = f"experts.{name}.{e}"
                self.assertEqual({g for (l, g) in records if l == layer}, {"fprop", "wgrad"} | ({"dgrad"} if name == "down_proj" else set()), layer)
                self.assertEqual(records[(layer, "fprop")]["operands"][0]["elements"], 32 * (DIM if name == "gate_up_proj" else HIDDEN), layer)
                wgrad = records[(layer, "wgrad")]["wgradError"]
                self.assertTrue(math.isclose(wgrad["gradNorm"], grad[e].float().norm().item(), rel_tol=1e-2), layer)
            self.assertNotIn((f"experts.{name}.2", "fprop"), records)

    def observed_records(self, grouped: bool):
        """The layerStats records of three steps at statsEvery 2 (steps 0 and 2 measure, step 1 keeps
        E for step 2's lag-1), measured as a group or expert by expert, the grouped GEMMs run, and the
        operands whose stats took a launch of their own."""
        model, _ = self.models()
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-observed-"), stats_every=2)
        self.addCleanup(bridge.close)
        bridge.start_run()
        generator = torch.Generator().manual_seed(3)
        measure = grouped_observe.observe_grouped if grouped else (lambda *args: None)
        alone, quantize = [], mx_ops.quantize_operand

        def counted(*args, **kwargs):
            if (args[6] if len(args) > 6 else kwargs.get("with_stats", False)):
                alone.append(args[4])
            return quantize(*args, **kwargs)
        with mock.patch.object(grouped_observe, "observe_grouped", side_effect=measure), mock.patch.object(mx_ops, "quantize_operand", counted):
            for step in range(3):
                bridge.begin_step(step)
                model(torch.randn(4, 16, DIM, generator=generator).to("cuda", torch.bfloat16)).float().pow(2).mean().backward()
                bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        return {(r["step"], r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}, model.experts.grouped_calls, alone

    def test_observed_as_a_group_like_expert_by_expert(self):
        want, _, one_by_one = self.observed_records(grouped=False)
        got, calls, alone = self.observed_records(grouped=True)
        self.assertEqual(calls, 3, "the trainer's grouped GEMMs ran on every step")
        # The up projection's experts are split in both runs (their input, the model's, needs no gradient).
        self.assertTrue(any("down_proj" in what for what in one_by_one), "expert by expert: a launch per operand")
        self.assertEqual([what for what in alone if "down_proj" in what], [],
                         "as a group: each operand's stats of all experts in one launch (mx_ops.segment_stats)")
        print(f"grouped GEMM float32 outputs: {grouped_emulation._FLOAT32_SUMS}")
        assert_same_records(self, got, want)
        self.assertIsNotNone(got[(2, "experts.down_proj.1", "wgrad")]["wgradError"]["lag1Cos"])

    def test_experts_outside_the_layer_group_keep_the_grouped_gemm(self):
        model, _ = self.models()
        twin, _ = self.models()
        x = torch.randn(4, 16, DIM, device="cuda", dtype=torch.bfloat16)
        twin(x).float().pow(2).mean().backward()  # plain, without the bridge
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-group-"), stats_every=2, stats_layer_groups=2)
        bridge.start_run()
        bridge.begin_step(0)  # group 0: layers 0, 2, 4 of gate_up_proj.0-2, down_proj.0-2
        model(x).float().pow(2).mean().backward()
        bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        layers_seen = {r["layer"] for r in read_log(run_dir) if r["type"] == "layerStats"}
        self.assertEqual(layers_seen, {"experts.gate_up_proj.0", "experts.down_proj.1"}, "expert 2 gets no token")
        self.assertEqual(model.experts.grouped_calls, 1)
        for name in ("gate_up_proj", "down_proj"):
            self.assertTrue(torch.allclose(getattr(model.experts, name).grad.float(), getattr(twin.experts, name).grad.float(), rtol=2e-2, atol=1e-4), name)

    def test_emulated_experts_outside_the_layer_group_stay_one_grouped_product(self):
        model, twin = self.models()
        for m in (model, twin):
            emulate(m, mx_gemms())
        x = torch.randn(4, 16, DIM, device="cuda", dtype=torch.bfloat16)
        twin(x).float().pow(2).mean().backward()  # emulated expert by expert, without the bridge
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-emulated-group-"), stats_every=2, stats_layer_groups=2)
        bridge.start_run()
        bridge.begin_step(0)  # group 0: gate_up_proj.0 and down_proj.1 measured (expert 2 gets no token)
        with mock.patch.object(GroupedEmulatedExperts, "apply", side_effect=GroupedEmulatedExperts.apply) as grouped:
            model(x).float().pow(2).mean().backward()
        bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        self.assertEqual(grouped.call_count, 2, "one grouped emulated product per parameter for the experts not measured")
        self.assertEqual({r["layer"] for r in read_log(run_dir) if r["type"] == "layerStats"}, {"experts.gate_up_proj.0", "experts.down_proj.1"})
        for name in ("gate_up_proj", "down_proj"):
            assert_within_last_bit(self, getattr(model.experts, name).grad, getattr(twin.experts, name).grad, name)

    def test_a_grouped_implementation_it_cannot_split_runs_eager_from_the_next_call(self):
        torch.manual_seed(0)
        model = Moe(GroupedExperts()).cuda()  # named grouped_mm, multiplied by stacked weights
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-unsplit-"), stats_every=1)
        bridge.start_run()
        with self.assertWarnsRegex(UserWarning, "GroupedExperts.*eager implementation from now on"):
            for step in range(2):
                bridge.begin_step(step)
                model(torch.randn(2, 8, DIM, device="cuda")).pow(2).mean().backward()
                bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        self.assertEqual(model.experts.grouped_calls, 1, "the first step ran its grouped implementation, unseen")
        steps = {r["step"] for r in read_log(run_dir) if r["type"] == "layerStats" and r["layer"] == "experts.down_proj.1"}
        self.assertEqual(steps, {1})


def run_start_log(**bridge_kwargs) -> list:
    """The bridge's log lines from starting and ending one run of the experts model."""
    lines = []
    bridge = bridge_for(Moe(StackedExperts()), tempfile.mkdtemp(prefix="mxscope-start-log-"), log=lines.append, **bridge_kwargs)
    bridge.start_run()
    bridge.end_run()
    bridge.close()
    return lines


class Experts(unittest.TestCase):
    def test_one_layer_per_expert_and_parameter(self):
        found = [(name, type(module).__name__) for name, module, _ in layers.observed_modules(Moe(StackedExperts()))]
        self.assertEqual([name for name, _ in found], [f"experts.{p}.{e}" for p in ("gate_up_proj", "down_proj") for e in range(EXPERTS)])
        self.assertEqual(layers.layer_kind("model.layers.3.mlp.experts.down_proj.7"), "down")
        self.assertFalse(layers.observed_modules(torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3)), extra=()) , "a convolution's 3-D weight is not experts")

    def test_chosen_by_their_names(self):
        model = Moe(StackedExperts())
        names = lambda **kw: [name for name, _, _ in layers.observed_modules(model, **kw)]
        self.assertEqual(names(include=["experts.down_proj.1"]), ["experts.down_proj.1"])
        self.assertEqual(names(include=["experts"]), [f"experts.{p}.{e}" for p in ("gate_up_proj", "down_proj") for e in range(EXPERTS)])
        self.assertEqual(names(exclude=["experts.gate_up_proj.*"]), [f"experts.down_proj.{e}" for e in range(EXPERTS)])
        self.assertEqual(names(exclude=["experts"]), [])
        with self.assertRaisesRegex(ValueError, "match no module"):
            names(include=["experts.down_proj.9"])

    def test_observed_per_expert(self):
        torch.manual_seed(0)
        model = Moe(StackedExperts())
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-experts-"), stats_every=2)
        bridge.start_run()
        for step in range(3):
            bridge.begin_step(step)
            model(torch.randn(4, 16, DIM)).pow(2).mean().backward()
            bridge.end_step(loss=0.0)
            if step < 2:
                model.zero_grad()
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        records = {(r["step"], r["layer"], r["gemm"]): r for r in read_log(run_dir) if r["type"] == "layerStats"}
        for e in range(EXPERTS):
            for param in ("gate_up_proj", "down_proj"):
                wgrad = records[(2, f"experts.{param}.{e}", "wgrad")]
                want = getattr(model.experts, param).grad[e].norm().item()
                self.assertTrue(math.isclose(wgrad["wgradError"]["gradNorm"], want, rel_tol=1e-5, abs_tol=1e-12), (param, e))
                fprop_x = records[(2, f"experts.{param}.{e}", "fprop")]["operands"][0]
                self.assertEqual(fprop_x["elements"], 0 if e == 2 else 32 * (DIM if param == "gate_up_proj" else HIDDEN), (param, e))
        self.assertIsNotNone(records[(2, "experts.down_proj.0", "wgrad")]["wgradError"]["lag1Cos"])

    def test_many_expert_layers_measured_every_stats_step_are_priced_at_the_start(self):
        from mxscope_bridge import bridge as bridge_module
        for groups, told in ((1, True), (2, False)):
            with self.subTest(stats_layer_groups=groups), mock.patch.object(bridge_module, "MANY_EXPERT_LAYERS", 2 * EXPERTS):
                lines = run_start_log(stats_every=2, stats_layer_groups=groups)
                hints = [line for line in lines if "are experts" in line]
                self.assertEqual(len(hints), 1 if told else 0, lines)
                if told:
                    self.assertIn(f"{2 * EXPERTS} of the {2 * EXPERTS} layers are experts", hints[0])
                    self.assertIn("stats_layer_groups", hints[0])
                    self.assertIn("wgrad_error_lag1=False", hints[0])

    def test_a_run_start_too_large_for_clients_is_told(self):
        from mxscope_bridge import link
        for limit, told in ((1_000, True), (1_000_000, False)):
            with self.subTest(limit=limit), mock.patch.object(link, "HARD_FRAME_BYTES", limit):
                lines = run_start_log()
                warned = [line for line in lines if "VS Code skips it" in line]
                self.assertEqual(len(warned), 1 if told else 0, lines)
                if told:
                    self.assertIn(f"{2 * EXPERTS} now", warned[0])
                    self.assertIn("lists no layer's sketch positions", warned[0])

    def test_sketch_positions_are_left_out_where_listing_them_passes_the_frame_limit(self):
        """Protocol 1.7: a runStarted that listing every layer's sketch positions would take past the
        frame a client reads (20,000-27,000 layers at the default sketch) lists none; the sketches follow
        the same positions."""
        from mxscope_bridge import link

        def run(limit):
            lines = []
            torch.manual_seed(0)
            model = Moe(StackedExperts())
            with mock.patch.object(link, "HARD_FRAME_BYTES", limit):
                bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-unlisted-"), stats_every=2, log=lines.append)
                bridge.start_run()
                generator = torch.Generator().manual_seed(1)
                for step in range(3):
                    bridge.begin_step(step)
                    model(torch.randn(2, 8, DIM, generator=generator)).pow(2).mean().backward()
                    bridge.end_step(loss=0.0)
                run_dir = bridge.run_dir
                bridge.end_run()
                bridge.close()
            records = read_log(run_dir)
            sketches = {(r["step"], r["layer"]): r["wgradError"]["sketch"] for r in records if r["type"] == "layerStats" and r["gemm"] == "wgrad"}
            return records[0], sketches, lines

        listed, want, _ = run(1 << 30)
        self.assertTrue(all(len(layer["sketchIndices"]) == 16 for layer in listed["layers"]))
        size = len(compact(listed).encode())
        unlisted_size = len(compact({**listed, "layers": [{k: v for k, v in layer.items() if k != "sketchIndices"} for layer in listed["layers"]]}).encode())
        started, got, lines = run((size + unlisted_size) // 2 + link.FRAME_OVERHEAD)
        self.assertEqual(started["type"], "runStarted")
        self.assertFalse(any("sketchIndices" in layer for layer in started["layers"]), "no layer lists them")
        self.assertEqual([line for line in lines if "VS Code skips it" in line], [], "the record fits")
        self.assertEqual(len([line for line in lines if "so no layer lists them" in line]), 1, lines)
        self.assertEqual(got, want, "the same sketches, at the same positions")
        self.assertTrue(got and all(len(sketch) == 16 for sketch in got.values()), got)

    def test_a_grouped_implementation_runs_eager_while_observed(self):
        torch.manual_seed(0)
        model = Moe(GroupedExperts())
        bridge = bridge_for(model, tempfile.mkdtemp(prefix="mxscope-grouped-"), stats_every=3)
        bridge.start_run()
        for step in range(4):  # step 0 is a stats step, step 1 has nothing to capture, 2 keeps E for 3
            bridge.begin_step(step)
            model(torch.randn(2, 8, DIM)).pow(2).mean().backward()
            bridge.end_step(loss=0.0)
        run_dir = bridge.run_dir
        bridge.end_run()
        bridge.close()
        self.assertEqual(model.experts.grouped_calls, 1, "only the step with nothing to capture ran grouped")
        wgrad = [r for r in read_log(run_dir) if r["type"] == "layerStats" and r["layer"] == "experts.down_proj.1" and r["gemm"] == "wgrad"]
        self.assertEqual([r["step"] for r in wgrad], [0, 3])
        self.assertIsNotNone(wgrad[1]["wgradError"]["lag1Cos"])

    def test_a_grouped_implementation_runs_as_chosen_while_emulation_is_off(self):
        torch.manual_seed(0)
        model = Moe(GroupedExperts())
        x = torch.randn(2, 8, DIM)
        plain = model(x)
        emulation = emulate(model, mx_gemms())
        self.assertEqual(model.experts.grouped_calls, 1)
        emulated = model(x)
        self.assertEqual(model.experts.grouped_calls, 1, "emulated experts run eager, one GEMM each")
        self.assertFalse(torch.equal(emulated, plain))
        emulation.enabled = False
        self.assertTrue(torch.equal(model(x), plain))
        self.assertEqual(model.experts.grouped_calls, 2, "switched off, the trainer's implementation runs")

    def test_emulated_like_experts_that_are_modules(self):
        torch.manual_seed(0)
        stacked = Moe(StackedExperts())
        modules = Moe(ModuleExperts(stacked.experts))
        x = torch.randn(4, 16, DIM)
        plain = stacked(x)
        results = []
        for model in (stacked, modules):
            emulate(model, mx_gemms())
            y = model(x)
            y.pow(2).mean().backward()
            results.append(y)
        self.assertFalse(torch.equal(results[0], plain), "the experts' GEMMs ran in MXFP4")
        self.assertTrue(torch.equal(results[0], results[1]))
        for e in range(EXPERTS):
            self.assertTrue(torch.equal(stacked.experts.gate_up_proj.grad[e], modules.experts.gate_up_proj[e].weight.grad), e)
            self.assertTrue(torch.equal(stacked.experts.down_proj.grad[e], modules.experts.down_proj[e].weight.grad), e)


if __name__ == "__main__":
    unittest.main()

"""A transformers.Trainer run with MXScopeCallback: the Trainer's steps, losses and tokens become the
run's, every linear layer reports on stats steps, and PEFT's LoRA layers report only the GEMMs that
run. Needs transformers (and peft for the LoRA test), so it runs where they are installed (the GPU
machines), and is skipped under Debian's torch 1.13."""
import glob
import json
import math
import os
import tempfile
import time
import unittest

import torch

try:
    import transformers
    from mxscope_bridge.hf_trainer import MXScopeCallback
except ImportError:  # pragma: no cover - Debian's torch 1.13 has no transformers
    transformers = None

try:
    import peft
except ImportError:  # pragma: no cover
    peft = None

from mxscope_bridge import default_gemms, gemm_config, run_config

from tests.wsclient import Client

SEQ, BATCH, ACCUMULATE, STEPS = 32, 2, 2, 6


def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ)
    return transformers.LlamaForCausalLM(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, count=64):
        generator = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 96, (count, SEQ), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def without_sqnr(operand):
    return {key: value for key, value in operand.items() if key != "sqnrDb"}


def records(run_dir):
    with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
        return [json.loads(line) for line in f]


@unittest.skipIf(transformers is None, "needs transformers")
class TrainerCallback(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="mxscope-hf-")

    def train(self, model, callback, steps=STEPS, eval_dataset=None, **arguments):
        args = transformers.TrainingArguments(**arguments,
            output_dir=os.path.join(self.out, "trainer"), max_steps=steps, per_device_train_batch_size=BATCH,
            gradient_accumulation_steps=ACCUMULATE, learning_rate=1e-3, logging_steps=1, save_strategy="no",
            report_to=[], seed=0, eval_strategy="steps" if eval_dataset is not None else "no", eval_steps=3,
            per_device_eval_batch_size=BATCH, dataloader_num_workers=0, disable_tqdm=True)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), eval_dataset=eval_dataset, callbacks=[callback])
        trainer.train()
        return trainer

    def callback(self, **options):
        gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
        options.setdefault("serve", False)
        callback = MXScopeCallback(run_config(stats_every=2, sketch_size=16, gemms=gemms), out_dir=self.out, handle_exit=False, **options)
        self.addCleanup(callback.close)
        return callback

    def run_dirs(self):
        return sorted((d for d in glob.glob(os.path.join(self.out, "*")) if os.path.exists(os.path.join(d, "telemetry.ndjson"))),
                      key=os.path.getmtime)

    def test_the_trainers_steps_losses_and_tokens_are_the_runs(self):
        model = tiny_llama()
        callback = self.callback()
        # max_grad_norm below the norms: the Trainer clips every step, after its norm and ours.
        trainer = self.train(model, callback, eval_dataset=Tokens(8), max_grad_norm=0.05)
        (run_dir,) = self.run_dirs()
        log = records(run_dir)
        steps = [r for r in log if r["type"] == "step"]
        self.assertEqual([r["step"] for r in steps], list(range(STEPS)))
        self.assertEqual([r["tokens"] for r in steps], [(s + 1) * BATCH * ACCUMULATE * SEQ for s in range(STEPS)])
        logged = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        self.assertEqual(len(logged), STEPS)
        for ours, theirs in zip([r["loss"] for r in steps], logged):
            self.assertTrue(math.isclose(ours, theirs, rel_tol=1e-3), f"step loss {ours} against the Trainer's {theirs}")
        lrs = [entry["learning_rate"] for entry in trainer.state.log_history if "learning_rate" in entry]
        self.assertTrue(all(math.isclose(ours, theirs, rel_tol=1e-6) for ours, theirs in zip([r["lr"] for r in steps], lrs)))
        norms = [entry["grad_norm"] for entry in trainer.state.log_history if "grad_norm" in entry]
        self.assertEqual(len(norms), STEPS)
        for ours, theirs in zip([r["gradNorm"] for r in steps], norms):
            self.assertTrue(math.isclose(ours, theirs, rel_tol=1e-4), f"step grad norm {ours} against the Trainer's {theirs}")
        validations = [r for r in log if r["type"] == "validation"]
        self.assertEqual(len(validations), 2, "eval_loss at steps 3 and 6")
        self.assertEqual([r["tokens"] for r in validations], [steps[r["step"]]["tokens"] for r in validations], "at their step's tokens")
        self.assertEqual(log[-1]["type"], "runEnded")
        self.assertEqual(log[-1]["status"], "completed")
        linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        layer_stats = [r for r in log if r["type"] == "layerStats"]
        self.assertEqual(sorted({r["step"] for r in layer_stats}), [0, 2, 4])
        self.assertEqual({(r["layer"], r["gemm"]) for r in layer_stats if r["step"] == 4},
                         {(name, gemm) for name in linears for gemm in ("fprop", "dgrad", "wgrad")})
        wgrad = [r for r in layer_stats if r["gemm"] == "wgrad"]
        self.assertTrue(all(r["wgradError"]["relErr"] > 0 for r in wgrad))
        self.assertTrue(all(r["simulated"] for r in layer_stats), "observed: the GEMMs ran at the model's precision")

    @unittest.skipIf(not torch.cuda.is_available(), "fp16 loss scaling needs a GPU")
    def test_no_gradient_norm_under_fp16_loss_scaling(self):
        # The gradients after backward are scaled: the Trainer unscales them only as it clips.
        trainer = self.train(tiny_llama(), self.callback(), steps=3, fp16=True)
        steps = [r for r in records(self.run_dirs()[-1]) if r["type"] == "step"]
        self.assertEqual([r["gradNorm"] for r in steps], [None] * 3)
        self.assertTrue(all(math.isfinite(r["loss"]) for r in steps))
        self.assertEqual(len([e for e in trainer.state.log_history if "grad_norm" in e]), 3, "the Trainer logs its own")

    def test_a_second_train_takes_the_next_run_config(self):
        model = tiny_llama()
        callback = self.callback(serve=True, port=0, print_listening=False)
        self.train(model, callback, steps=2)
        client = Client(callback.bridge.server.connect_url)  # the extension switching the rotation between runs
        self.addCleanup(client.close)
        client.recv()
        client.send({"type": "setNextRunConfig", "id": "c1", "change": {"gemms": {"wgrad": {"rotation": "none"}}}})
        client.recv_until(lambda m: m.get("type") == "ack")
        self.train(model, callback, steps=2)
        first, second = (records(d)[0] for d in self.run_dirs())
        self.assertEqual(first["config"]["gemms"]["wgrad"]["rotation"], "hadamard")
        self.assertEqual(second["config"]["gemms"]["wgrad"]["rotation"], "none")
        self.assertEqual(second["config"]["steps"], 2)

    def test_stop_in_the_extension_stops_the_trainer_after_that_step(self):
        callback = self.callback(serve=True, port=0, print_listening=False)
        client = []

        class PressStop(transformers.TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                if state.global_step == 2:  # the extension's Stop, taken at this step's end_step
                    client.append(Client(callback.bridge.server.connect_url))
                    client[0].recv()
                    client[0].send({"type": "stopRun", "id": "stop"})
                    time.sleep(0.3)

        model = tiny_llama()
        args = transformers.TrainingArguments(output_dir=os.path.join(self.out, "trainer"), max_steps=STEPS, per_device_train_batch_size=BATCH,
                                              save_strategy="no", report_to=[], disable_tqdm=True, logging_steps=1)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback, PressStop()])
        trainer.train()
        self.addCleanup(lambda: client and client[0].close())
        log = records(self.run_dirs()[-1])
        self.assertEqual([r["step"] for r in log if r["type"] == "step"], [0, 1, 2])
        self.assertEqual(trainer.state.global_step, 3, "the Trainer stopped after step 2")
        self.assertEqual((log[-1]["type"], log[-1]["status"]), ("runEnded", "stopped"))

    def test_gradient_checkpointing_changes_nothing_the_run_reports(self):
        for emulate in (False, True):
            runs = []
            for checkpointing in (False, True):
                self.train(tiny_llama(), self.callback(emulate=emulate), steps=3, gradient_checkpointing=checkpointing)
                log = records(self.run_dirs()[-1])
                runs.append(([r["loss"] for r in log if r["type"] == "step"],
                             {(r["step"], r["layer"], r["gemm"]): r["operands"] for r in log if r["type"] == "layerStats"}))
            (losses, stats), (checkpointed_losses, checkpointed_stats) = runs
            self.assertEqual(checkpointed_losses, losses, f"emulate={emulate}")
            self.assertEqual(set(checkpointed_stats), set(stats), f"emulate={emulate}")
            for key, operands in stats.items():
                label = f"emulate={emulate} {key}: each operand measured once"
                self.assertEqual([without_sqnr(o) for o in checkpointed_stats[key]], [without_sqnr(o) for o in operands], label)
                for got, want in zip(checkpointed_stats[key], operands):  # float64 sums added on the GPU in any order
                    self.assertTrue(math.isclose(got["sqnrDb"], want["sqnrDb"], rel_tol=1e-12), label)

    @unittest.skipIf(peft is None, "needs peft")
    def test_lora_reports_wgrad_for_the_adapters_only_observed_and_emulated(self):
        keys = []
        for emulate in (False, True):
            model = peft.get_peft_model(tiny_llama(), peft.LoraConfig(r=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
            trainer = self.train(model, self.callback(emulate=emulate), steps=2)
            log = records(self.run_dirs()[-1])
            norms = [entry["grad_norm"] for entry in trainer.state.log_history if "grad_norm" in entry]
            ours = [r["gradNorm"] for r in log if r["type"] == "step"]
            self.assertEqual(len(ours), len(norms))
            self.assertTrue(all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(ours, norms)), f"the adapters' gradient norm {ours} vs {norms}")
            layer_stats = {(r["layer"], r["gemm"]) for r in log if r["type"] == "layerStats"}
            wgrad = {layer for layer, gemm in layer_stats if gemm == "wgrad"}
            self.assertTrue(wgrad, "the adapters train")
            self.assertTrue(all(".lora_A." in layer or ".lora_B." in layer for layer in wgrad), sorted(wgrad))
            frozen = {layer for layer, _ in layer_stats if "base_layer" in layer or layer.endswith("lm_head")}
            self.assertTrue(frozen)
            for layer in frozen:
                self.assertIn((layer, "fprop"), layer_stats)
                # PEFT freezes the embedding too: the first attention's input needs no gradient, so its
                # q and v projections have no Dgrad; every later frozen layer passes a gradient on.
                first = ".layers.0.self_attn." in layer
                self.assertEqual((layer, "dgrad") in layer_stats, not first, layer)
            self.assertEqual(log[-1]["status"], "completed")
            keys.append(layer_stats)
        self.assertEqual(keys[0], keys[1], "observed and emulated report the same GEMMs")


if __name__ == "__main__":
    unittest.main()

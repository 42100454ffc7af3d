"""A Lightning Trainer run with MXScopeLightningCallback: the Trainer's optimizer steps, losses and
learning rates become the run's, and every linear layer reports on stats steps. Needs Lightning, so
it runs where it is installed (the GPU machines) and is skipped under Debian's torch 1.13."""
import glob
import json
import math
import os
import tempfile
import unittest

import torch

try:
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    from mxscope_bridge.lightning import MXScopeLightningCallback
except ImportError:  # pragma: no cover - not on Debian's torch 1.13
    pl = None

from mxscope_bridge import default_gemms, gemm_config, run_config

VOCAB, DIM, SEQ, BATCH, ACCUMULATE, STEPS = 64, 64, 16, 4, 2, 6

if pl is not None:
    class TinyLM(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embed = torch.nn.Embedding(VOCAB, DIM)
            self.up = torch.nn.Linear(DIM, 2 * DIM)
            self.down = torch.nn.Linear(2 * DIM, DIM)
            self.head = torch.nn.Linear(DIM, VOCAB, bias=False)
            self.returned = []
            self.norms = []

        def forward(self, ids):
            h = self.embed(ids)
            return self.head(h + self.down(torch.nn.functional.gelu(self.up(h))))

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.cross_entropy(self(batch).flatten(0, 1), batch.flatten())
            self.returned.append(loss.item())
            return loss

        def on_before_optimizer_step(self, optimizer):
            # Lightning calls this after the callbacks' hook and before it clips.
            self.norms.append(float(torch.nn.utils.clip_grad_norm_(self.parameters(), float("inf"))))

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.cross_entropy(self(batch).flatten(0, 1), batch.flatten()))

        def configure_optimizers(self):
            optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5),
                                                             "interval": "step"}}


def batches(count):
    return torch.utils.data.DataLoader(torch.randint(0, VOCAB, (count, SEQ), generator=torch.Generator().manual_seed(1)), batch_size=BATCH)


@unittest.skipIf(pl is None, "needs Lightning")
class LightningCallback(unittest.TestCase):
    def test_the_trainers_steps_losses_and_learning_rates_are_the_runs(self):
        out = tempfile.mkdtemp(prefix="mxscope-lightning-")
        gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
        callback = MXScopeLightningCallback(run_config(stats_every=2, sketch_size=16, gemms=gemms), serve=False, out_dir=out, handle_exit=False)
        self.addCleanup(callback.close)
        model = TinyLM()
        trainer = pl.Trainer(max_steps=STEPS, accumulate_grad_batches=ACCUMULATE, callbacks=[callback], logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             val_check_interval=4, num_sanity_val_steps=0, limit_val_batches=2, accelerator="auto", devices=1,
                             gradient_clip_val=0.01)
        trainer.fit(model, batches(BATCH * ACCUMULATE * STEPS), batches(2 * BATCH))
        (run_dir,) = glob.glob(os.path.join(out, "*"))
        with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
            log = [json.loads(line) for line in f]
        steps = [r for r in log if r["type"] == "step"]
        self.assertEqual([r["step"] for r in steps], list(range(STEPS)))
        self.assertEqual([r["tokens"] for r in steps], [(s + 1) * BATCH * ACCUMULATE * SEQ for s in range(STEPS)])
        for step, record in zip(range(STEPS), steps):
            micro = model.returned[step * ACCUMULATE:(step + 1) * ACCUMULATE]
            self.assertTrue(math.isclose(record["loss"], sum(micro) / ACCUMULATE, rel_tol=1e-5), f"step {step}: {record['loss']} vs {micro}")
            self.assertTrue(math.isclose(record["lr"], 1e-3 * 0.5 ** step, rel_tol=1e-9), f"step {step} lr {record['lr']}")
            self.assertGreater(model.norms[step], 0.02, "the clip at 0.01 changes the gradients after the norm")
            self.assertTrue(math.isclose(record["gradNorm"], model.norms[step], rel_tol=1e-5), f"step {step}: {record['gradNorm']} vs {model.norms[step]}")
        validations = [r for r in log if r["type"] == "validation"]
        self.assertGreaterEqual(len(validations), 2, "val_loss every 4 training batches")
        self.assertTrue(all(math.isfinite(r["loss"]) for r in validations))
        tokens_at = {r["step"]: r["tokens"] for r in steps}
        self.assertTrue(all(r["tokens"] == tokens_at[r["step"]] for r in validations), "validations sit at their step's tokens")
        layer_stats = [r for r in log if r["type"] == "layerStats"]
        self.assertEqual(sorted({r["step"] for r in layer_stats}), [0, 2, 4])
        self.assertEqual({(r["layer"], r["gemm"]) for r in layer_stats if r["step"] == 2},
                         {(layer, gemm) for layer in ("up", "down", "head") for gemm in ("fprop", "dgrad", "wgrad")})
        self.assertTrue(all(r["wgradError"]["relErr"] > 0 for r in layer_stats if r["gemm"] == "wgrad"))
        self.assertEqual((log[-1]["type"], log[-1]["status"]), ("runEnded", "completed"))

    @unittest.skipIf(not torch.cuda.is_available(), "16-mixed precision needs a GPU")
    def test_the_gradient_norm_is_unscaled_under_fp16_mixed_precision(self):
        # Lightning unscales the gradients before on_before_optimizer_step: the norm is the true one,
        # not the loss scale (65536 at the start) times it.
        out = tempfile.mkdtemp(prefix="mxscope-lightning-fp16-")
        callback = MXScopeLightningCallback(run_config(stats_every=100), serve=False, out_dir=out, handle_exit=False)
        self.addCleanup(callback.close)
        model = TinyLM()
        trainer = pl.Trainer(max_steps=3, callbacks=[callback], logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, accelerator="gpu", devices=1, precision="16-mixed", limit_val_batches=0)
        trainer.fit(model, batches(BATCH * 3))
        (run_dir,) = glob.glob(os.path.join(out, "*"))
        with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
            norms = [r["gradNorm"] for r in map(json.loads, f) if r["type"] == "step"]
        self.assertEqual(len(norms), 3)
        for ours, theirs in zip(norms, model.norms):
            self.assertTrue(math.isclose(ours, theirs, rel_tol=1e-5), f"{ours} vs the module's {theirs}")
        self.assertTrue(all(norm < 100 for norm in norms), "unscaled")


if __name__ == "__main__":
    unittest.main()

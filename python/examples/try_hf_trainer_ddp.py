"""`MXScopeCallback` in a `transformers.Trainer` under DDP, against the Trainer's own log: each step's
loss and gradient norm on rank 0's run log next to what the Trainer logged (both are the ranks'
figures: the mean loss, the norm of the averaged gradients), the tokens of every rank, and every
linear layer's three GEMMs on the stats steps. Observed, then emulated; with transformers'
`average_tokens_across_devices` on and off. A small Llama from a config, random tokens.

    torchrun --nproc_per_node 2 python/examples/try_hf_trainer_ddp.py          # one GPU per rank, NCCL, bf16
    torchrun --nproc_per_node 2 python/examples/try_hf_trainer_ddp.py --cpu    # CPU ranks, gloo (no GPU needed)

Prints one line per run on rank 0 and exits 1 if a loss or gradient norm differs from the Trainer's.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import transformers  # noqa: E402

from mxscope_bridge import default_gemms, gemm_config, run_config  # noqa: E402
from mxscope_bridge.hf_trainer import MXScopeCallback  # noqa: E402
from try_hf_trainer import Tokens  # noqa: E402  (beside this file)

VOCAB, SEQ, STEPS, STATS_EVERY = 500, 64, 8, 4


def worst_gap(ours, theirs):
    """The largest relative difference, or a reason when a figure is missing."""
    if len(ours) != len(theirs) or None in ours:
        return f"missing ({len(ours)} ours, {len(theirs)} logged)"
    return max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true", help="CPU ranks over gloo instead of a GPU per rank over NCCL")
    options = parser.parse_args()
    out = tempfile.mkdtemp(prefix="mxscope-hf-ddp-")
    failed = False
    for emulate, average in ((False, True), (False, False), (True, True)):
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
        callback = MXScopeCallback(run_config(stats_every=STATS_EVERY, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32))),
                                   serve=False, out_dir=out, handle_exit=False, emulate=emulate)
        # max_grad_norm below the norms: the Trainer clips every step, after its norm and the callback's.
        args = transformers.TrainingArguments(
            output_dir=os.path.join(out, "trainer"), max_steps=STEPS, per_device_train_batch_size=4, gradient_accumulation_steps=2,
            learning_rate=1e-3, max_grad_norm=0.05, logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True,
            ddp_find_unused_parameters=False, average_tokens_across_devices=average,
            **({"use_cpu": True, "ddp_backend": "gloo"} if options.cpu else {"bf16": True}))
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(256, SEQ, VOCAB), callbacks=[callback])
        trainer.train()
        if torch.distributed.get_rank() == 0:
            with open(os.path.join(callback.bridge.run_dir, "telemetry.ndjson")) as f:
                log = [json.loads(line) for line in f]
            steps = [r for r in log if r["type"] == "step"]
            stats = [r for r in log if r["type"] == "layerStats"]
            logged = trainer.state.log_history
            loss_gap = worst_gap([r["loss"] for r in steps], [e["loss"] for e in logged if "loss" in e])
            norm_gap = worst_gap([r["gradNorm"] for r in steps], [e["grad_norm"] for e in logged if "grad_norm" in e])
            linears = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
            last = max(r["step"] for r in stats)
            reported = {(r["layer"], r["gemm"]) for r in stats if r["step"] == last}
            print(f"world {callback.bridge.world}, {'emulated' if emulate else 'observed'}, average_tokens_across_devices {average}: "
                  f"loss vs the Trainer's log, worst relative gap {loss_gap}; gradient norm {norm_gap}; "
                  f"tokens {[r['tokens'] for r in steps[:3]]}…; stats steps {sorted({r['step'] for r in stats})}, "
                  f"{len(reported)} of {3 * len(linears)} (layer, GEMM) pairs at step {last}; run {log[-1].get('status')}", flush=True)
            # The Trainer rounds the loss it logs to 4 decimals.
            failed |= isinstance(loss_gap, str) or loss_gap > 1e-4 or isinstance(norm_gap, str) or norm_gap > 1e-4
        callback.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

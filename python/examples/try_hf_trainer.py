"""The bridge inside a `transformers.Trainer` (MXScopeCallback), full fine-tuning and PEFT LoRA, against
the same Trainer without it in the same process. A Llama-shaped model from a config (random weights,
random tokens), bf16 autocast, AdamW. Prints per setup and mode the mean and median step time, the
ratio to the plain Trainer of the same setup (the baseline), the peak GPU memory, and what the run
log holds (stats steps, layers with Wgrad records).

    python3 python/examples/try_hf_trainer.py [--steps 50] [--warmup 20] [--hidden 1024] [--layers 8] [--seq 1024] [--batch 8] [--layer-groups 1]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import transformers  # noqa: E402

from mxscope_bridge import default_gemms, gemm_config, run_config  # noqa: E402
from mxscope_bridge.hf_trainer import MXScopeCallback  # noqa: E402


EMULATED_BASE = "emulated, adapters bf16"


class StepTimer(transformers.TrainerCallback):
    """Wall time of each optimizer step, the GPU drained at both ends (the same cost on every side)."""

    def __init__(self):
        self.times, self._begin = [], None

    def on_step_begin(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self._begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self._begin) * 1000)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, count, seq, vocab):
        self.ids = torch.randint(0, vocab, (count, seq), generator=torch.Generator().manual_seed(1))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def model_for(opts, lora):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=opts.hidden, intermediate_size=opts.hidden * 11 // 4,
                                      num_hidden_layers=opts.layers, num_attention_heads=opts.hidden // 64,
                                      num_key_value_heads=opts.hidden // 256, max_position_embeddings=opts.seq)
    model = transformers.LlamaForCausalLM(config)
    if lora:
        import peft
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, target_modules=targets, lora_dropout=0.0))
    return model


def one(opts, lora, mode, out_dir):
    model = model_for(opts, lora)
    timer = StepTimer()
    callbacks = [timer]
    if mode != "plain":
        gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
        # FP4 LoRA recipes quantize the frozen base GEMMs and keep the rank-16 adapters in bf16.
        adapters_apart = {"exclude": ["*.lora_A.*", "*.lora_B.*"]} if mode == EMULATED_BASE else {}
        config = run_config(stats_every=10, gemms=gemms, stats_layer_groups=opts.layer_groups)
        callbacks.append(MXScopeCallback(config, serve=False, out_dir=out_dir,
                                         emulate=mode != "observed", handle_exit=False, **adapters_apart))
    args = transformers.TrainingArguments(
        output_dir=os.path.join(out_dir, "trainer"), max_steps=opts.steps, per_device_train_batch_size=opts.batch,
        learning_rate=1e-4, bf16=True, logging_steps=opts.steps, save_strategy="no", report_to=[], seed=0,
        dataloader_num_workers=0, disable_tqdm=True)
    torch.cuda.reset_peak_memory_stats()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(opts.steps * opts.batch, opts.seq, 32000),
                                   callbacks=callbacks)
    trainer.train()
    peak = torch.cuda.max_memory_allocated() / 2 ** 30
    held = {"stats steps": 0, "wgrad layers": 0, "layers": 0}
    if mode != "plain":
        callbacks[-1].close()
        run_dir = callbacks[-1].bridge.run_dir
        with open(os.path.join(run_dir, "telemetry.ndjson")) as f:
            log = [json.loads(line) for line in f]
        stats = [r for r in log if r["type"] == "layerStats"]
        held = {"stats steps": len({r["step"] for r in stats}), "wgrad layers": len({r["layer"] for r in stats if r["gemm"] == "wgrad"}),
                "layers": len({r["layer"] for r in stats})}
    times = timer.times[opts.warmup:]
    first_pair = timer.times[9] + timer.times[10] if len(timer.times) > 10 else float("nan")
    del trainer, model
    torch.cuda.empty_cache()
    return statistics.mean(times), statistics.median(times), peak, held, first_pair


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=20,
                        help="steps left out of the figures: a run's first steps with lag-1 (9 and 10 at statsEvery 10) pin E's host "
                             "buffers and compile the lag-1 kernels once; the default times whole statsEvery periods after them")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layer-groups", type=int, default=1, help="stats_layer_groups (opt-in): each stats step measures one N-th of the layers")
    parser.add_argument("--setups", default="full,lora", help="comma-separated: full (full fine-tuning), lora")
    parser.add_argument("--modes", default="observed,emulated", help="comma-separated modes measured against the plain Trainer: observed, emulated (and, with LoRA, the adapters in bf16)")
    parser.add_argument("--run-logs", default=None, help="write the bridge's run logs here (for the extension's telemetry cost of each; default: a temporary folder)")
    opts = parser.parse_args()
    out_dir = opts.run_logs or tempfile.mkdtemp(prefix="mxscope-hf-")
    print(f"Llama hidden {opts.hidden}, {opts.layers} layers, {opts.batch} x {opts.seq} tokens/step, bf16 autocast, AdamW, "
          f"steps {opts.warmup}..{opts.steps - 1} timed (statsEvery 10: stats steps 0, 10, 20, ..., each after a step that keeps E for lag-1), "
          f"layer groups {opts.layer_groups}; "
          f"{torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}")
    print("| setup | mode | mean ms | median ms | mean vs plain Trainer (same setup) | steps 9 + 10, ms (once per run, untimed) | peak GiB | stats steps | layers reporting | with Wgrad |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    modes = opts.modes.split(",")
    for lora in [setup == "lora" for setup in opts.setups.split(",")]:
        base = None
        for mode in ["plain"] + [m for m in ("observed", "emulated") if m in modes] + ([EMULATED_BASE] if lora and "emulated" in modes else []):
            mean, median, peak, held, first_pair = one(opts, lora, mode, out_dir)
            base = base or mean
            ratio = "baseline" if mode == "plain" else f"{mean / base:.3f}x"
            print(f"| {'LoRA r=16, all projections' if lora else 'full fine-tuning'} | {mode} | {mean:.1f} | {median:.1f} | {ratio} | "
                  f"{first_pair:.0f} | {peak:.1f} | {held['stats steps']} | {held['layers']} | {held['wgrad layers']} |", flush=True)


if __name__ == "__main__":
    main()

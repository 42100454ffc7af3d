"""The bridge on `transformers` models we did not write: each architecture built from a small config
(random weights), trained a few steps observed and then emulated. Prints, per model and mode, how
many GEMM weights the bridge found against the model's, whether every step ran, and the first error.

    python3 python/examples/try_models.py [--device cuda] [--models gpt2,albert,...]
"""
import argparse
import os
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config  # noqa: E402
try:
    from mxscope_bridge.experts import ExpertSlice  # noqa: E402
except ImportError:  # a bridge from before experts were layers (to compare against it)
    ExpertSlice = ()

SMALL = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)


def configs():
    import transformers as tf
    return {
        "llama": lambda: tf.LlamaConfig(**SMALL),
        "gpt2": lambda: tf.GPT2Config(n_embd=256, n_layer=2, n_head=4, vocab_size=1000),
        "albert (shared layers)": lambda: tf.AlbertConfig(embedding_size=128, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                                                          num_attention_heads=4, vocab_size=1000),
        "bert": lambda: tf.BertConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000),
        "t5": lambda: tf.T5Config(d_model=256, d_ff=512, num_layers=2, num_heads=4, d_kv=64, vocab_size=1000, decoder_start_token_id=0, pad_token_id=0),
        "qwen2": lambda: tf.Qwen2Config(**SMALL),
        "phi3 (fused qkv)": lambda: tf.Phi3Config(**SMALL, pad_token_id=0),
        "mixtral (MoE)": lambda: tf.MixtralConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2),
        "qwen2-moe": lambda: tf.Qwen2MoeConfig(**SMALL, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256,
                                               shared_expert_intermediate_size=256),
    }


def build(name, config):
    import transformers as tf
    if name.startswith("t5"):
        return tf.T5ForConditionalGeneration(config)
    if name.startswith(("albert", "bert")):
        return tf.AutoModelForMaskedLM.from_config(config)
    return tf.AutoModelForCausalLM.from_config(config)


def gemm_weights(model):
    """Parameters a GEMM multiplies by (2-D and 3-D weights outside embeddings), by name."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return {n: p for n, p in model.named_parameters() if p.dim() in (2, 3) and id(p) not in embeddings}


def one(name, make, mode, device, steps):
    torch.manual_seed(0)
    model = build(name, make()).to(device)
    weights = gemm_weights(model)
    gemms = default_gemms(gemm_config("mxfp4", "hadamard", 32))
    bridge = Bridge(model, run_config(steps=steps, stats_every=2, sketch_size=16, gemms=gemms), emulate=mode == "emulate", serve=False,
                    out_dir=None, print_listening=False, handle_exit=False, log=lambda line: None)
    published = []
    bridge._publish_stats = lambda stats, publish=bridge._publish_stats: (published.append(stats.count), publish(stats))[1]
    optimizer = torch.optim.AdamW(model.parameters(), 1e-4)
    done, error = 0, ""
    observed = {id(getattr(module, "param", None) if isinstance(module, ExpertSlice) else module.weight) for _, module, _ in bridge.layers}
    try:
        bridge.start_run()
        for step in range(steps):
            bridge.begin_step(step)
            ids = torch.randint(1, 1000, (4, 64), device=device)
            with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            bridge.end_step(loss=loss.detach())
            optimizer.step()
            optimizer.zero_grad()
            done += 1
    except Exception as e:  # noqa: BLE001 - the point is to report it
        error = f"{type(e).__name__}: {str(e)[:160]} @ " + " < ".join(
            f"{os.path.basename(f.filename)}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)[-3:])
    finally:
        bridge.close()
    seen_numel = sum(p.numel() for p in weights.values() if id(p) in observed)
    all_numel = sum(p.numel() for p in weights.values())
    unobserved = sorted({n.rsplit(".", 1)[0].split(".")[-1] for n, p in weights.items() if id(p) not in observed})
    implementation = getattr(model.config, "_experts_implementation", None)
    if implementation is not None:
        name = f"{name}, experts {implementation}"
    return (f"| {name} | {mode} | {len(bridge.layers)} | {seen_numel / all_numel:.0%} | {', '.join(unobserved) or '-'} | "
            f"{done}/{steps} | {sum(published)} | {error or 'ok'} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {args.device}")
    print("| model | mode | layers observed | GEMM weight elements observed | weights not observed (kinds) | steps | layerStats records | result |")
    print("|---|---|---|---|---|---|---|---|")
    wanted = [m for m in args.models.split(",") if m]
    for name, make in configs().items():
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        for mode in ("observe", "emulate"):
            print(one(name, make, mode, torch.device(args.device), args.steps), flush=True)


if __name__ == "__main__":
    main()

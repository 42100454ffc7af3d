"""Every causal-LM architecture of the installed `transformers`, built small from its config's defaults
(a few fields set for size) with random weights, trained two steps observed and three emulated (one of
them measured). Prints per architecture: the share of its GEMM weights the bridge observes, the kinds
it does not, the expert layers it found, the grouped emulated products run (experts of a grouped GEMM
on the emulated steps without a capture), and the first error of each mode. `BUILD` lines are architectures this generic
shrinking could not build, or whose model fails a step without the bridge: not the bridge's failures.

    python3 python/examples/try_causal_lms.py [--only moe,mixtral,...] [--seconds 60]
    (a GPU with torch 2.x and transformers 5)
"""
import argparse
import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config  # noqa: E402
from mxscope_bridge.experts import ExpertSlice  # noqa: E402
from mxscope_bridge.grouped_emulation import GroupedEmulatedExperts  # noqa: E402
from try_models import gemm_weights  # noqa: E402

#: Size fields, set where a config has them (and in its text_config); the rest keep their defaults.
SMALL = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
             moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts=4, num_local_experts=4, n_routed_experts=4,
             num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=0, head_dim=32, qk_rope_head_dim=16, qk_nope_head_dim=16,
             v_head_dim=32, kv_lora_rank=32, q_lora_rank=32, decoder_sparse_step=1, mlp_only_layers=[], rotary_dim=16,
             n_embd=128, n_layer=2, n_head=4, n_positions=256, max_position_embeddings=256, d_model=128, ffn_dim=256, num_layers=2,
             num_heads=4, n_inner=256, decoder_layers=2, encoder_layers=2, decoder_attention_heads=4, encoder_attention_heads=4,
             decoder_ffn_dim=256, encoder_ffn_dim=256, n_groups=1, mamba_n_heads=8, mamba_n_groups=1, n_mamba_heads=8,
             vocab_size_per_layer_input=1000, hidden_size_per_layer_input=16, num_kv_shared_layers=0, global_head_dim=32, top_k_experts=2,
             index_n_heads=4, index_head_dim=32, index_topk=16)
#: Architectures with more parameters than this once shrunk are left out (a config this shrinking misses).
MAX_PARAMETERS = 100_000_000
TOKENS = (2, 32)


class TimedOut(Exception):
    pass


def causal_lm_types(only):
    """(model_type, config class) of every architecture AutoModelForCausalLM builds, filtered by substrings of `only`."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        if only and not any(word in model_type for word in only):
            continue
        try:
            yield model_type, CONFIG_MAPPING[model_type]
        except KeyError:
            continue


def _has(config, key) -> bool:
    """Whether config has one value of `key` (some configs raise on a field that varies by layer)."""
    try:
        return hasattr(config, key)
    except Exception:  # noqa: BLE001
        return False


def _set(config, key, value) -> bool:
    """config.key = value where the config has the key and takes the value (derived properties,
    strict fields and per-layer attributes refuse); whether it did."""
    try:
        if not _has(config, key):
            return False
        setattr(config, key, value)
        return True
    except Exception:  # noqa: BLE001 - each config refuses in its own way
        return False


def _layers_for_every_type(config) -> int:
    """The fewest first layers that hold every kind of layer the config lists (a hybrid model's
    attention and linear-attention layers), at least SMALL's."""
    types = list(getattr(config, "layer_types", None) or [])
    wanted = set(types)
    for count in range(SMALL["num_hidden_layers"], len(types) + 1):
        if set(types[:count]) == wanted:
            return count
    return SMALL["num_hidden_layers"]


def _small_fields(config) -> dict:
    """SMALL's fields that `config` has, for its constructor."""
    fields = {key: value for key, value in SMALL.items() if _has(config, key)}
    if _has(config, "qk_rope_head_dim"):
        fields.pop("head_dim", None)  # multi-head latent attention derives its own
    if "num_hidden_layers" in fields:
        fields["num_hidden_layers"] = _layers_for_every_type(config)
    if all(_has(config, key) for key in ("expand", "num_heads", "head_dim")):  # Mamba-2: heads × head size = expand × hidden
        fields["head_dim"] = config.expand * SMALL["hidden_size"] // SMALL["num_heads"]
    return fields


def rebuilt(config):
    """A config of config's class made with SMALL's fields, so that the fields its constructor derives
    from them (MLA's rotary head size, a hybrid's layer list, a Mamba-2 head size) follow; config itself
    where the constructor refuses them. Then shrunk in place as well."""
    try:
        config = type(config)(**_small_fields(config))
    except Exception:  # noqa: BLE001 - each config refuses in its own way
        pass
    text = getattr(config, "text_config", None)
    if text is not None and text is not config:
        config.text_config = rebuilt(text)
    shrink(config)
    return config


def shrink(config):
    """Sets SMALL's fields on config (and its text_config) where it has them."""
    for key, value in _small_fields(config).items():
        _set(config, key, value)
    types = getattr(config, "layer_types", None)
    if types is not None and isinstance(getattr(config, "num_hidden_layers", None), int):
        _set(config, "layer_types", types[:config.num_hidden_layers])
    for key in ("num_encoder_layers", "num_decoder_layers"):
        _set(config, key, SMALL["num_hidden_layers"])
    _set(config, "decoder_vocab_size", SMALL["vocab_size"])
    _set(config, "is_decoder", True)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(getattr(config, key, None), int) and getattr(config, key) >= SMALL["vocab_size"]:
            setattr(config, key, 0)
    text = getattr(config, "text_config", None)
    if text is not None and text is not config:
        shrink(text)


def small_model(config_class, rebuild: bool):
    """The architecture with its config shrunk (rebuilt from SMALL's fields, or the defaults with them
    set), on the GPU; ValueError when it is still large."""
    import transformers as tf
    config = config_class()
    if rebuild:
        config = rebuilt(config)
    else:
        shrink(config)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in tf.AutoModelForCausalLM.from_config(config).parameters())
    if parameters > MAX_PARAMETERS:
        raise ValueError(f"{parameters / 1e6:.0f} M parameters once shrunk")
    return tf.AutoModelForCausalLM.from_config(config).cuda()


def forward_loss(model):
    """The loss of one batch of random tokens, under bf16 autocast, without a KV cache (training needs none)."""
    ids = torch.randint(1, 1000, TOKENS, device="cuda")
    with torch.autocast("cuda", torch.bfloat16):
        return model(input_ids=ids, labels=ids, use_cache=False).loss


def where(error):
    return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in traceback.extract_tb(error.__traceback__)[-3:])


class CountedGroupedProducts:
    """Counts the grouped emulated products (experts of a grouped GEMM emulated on a step without a capture)."""

    def __enter__(self):
        self.count = 0
        apply = GroupedEmulatedExperts.apply

        def counted(*args):
            self.count += 1
            return apply(*args)
        GroupedEmulatedExperts.apply = counted
        return self

    def __exit__(self, *exc):
        del GroupedEmulatedExperts.apply  # Function.apply again


def probe(model, mode):
    """Steps with the bridge: observed, two capture steps; emulated, a stats step and two steps
    without a capture (where a grouped GEMM's experts run as one grouped emulated product). Returns
    (layers, expert layers, observed parameter ids, names of the layers without records in the stats
    step, grouped emulated products, error or '')."""
    stats_every, steps = (1, 2) if mode == "observe" else (4, 3)
    bridge = Bridge(model, run_config(stats_every=stats_every, sketch_size=8, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32))),
                    emulate=mode == "emulate", serve=False, out_dir=None, print_listening=False, handle_exit=False, log=lambda line: None)
    layers = bridge.layers
    observed = {id(module.param if isinstance(module, ExpertSlice) else module.weight) for _, module, _ in layers}
    experts = sum(isinstance(module, ExpertSlice) for _, module, _ in layers)
    with_stats = set()  # layers with records in the last step (emulated: the layers whose GEMMs ran emulated)
    bridge._publish_stats = lambda stats, publish=bridge._publish_stats: (with_stats.clear(), with_stats.update(k[0] for k in stats.keys), publish(stats))[-1]
    error = ""
    try:
        bridge.start_run()
        with CountedGroupedProducts() as grouped:
            for step in range(steps):
                bridge.begin_step(step)
                loss = forward_loss(model)
                loss.backward()
                bridge.end_step(loss=loss.detach())
                model.zero_grad()
                if not torch.isfinite(loss):
                    raise ArithmeticError(f"the loss of step {step} is {loss.item()}")
    except TimedOut:
        raise
    except Exception as e:  # noqa: BLE001 - the point is to report it
        error = f"{type(e).__name__}: {str(e)[:150]} @ {where(e)}"
    finally:
        bridge.close()
    silent = [name for name, _, _ in layers if name not in with_stats]
    return len(layers), experts, observed, silent, grouped.count, error


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated substrings of model types (default: all)")
    parser.add_argument("--seconds", type=int, default=30, help="per architecture, build and both modes")
    args = parser.parse_args()
    import transformers
    print(f"transformers {transformers.__version__}, torch {torch.__version__}", flush=True)

    def alarm(signum, frame):
        raise TimedOut()
    signal.signal(signal.SIGALRM, alarm)
    failed = 0
    for model_type, config_class in causal_lm_types([w for w in args.only.split(",") if w]):
        signal.alarm(args.seconds)
        try:
            model, errors = None, []
            for rebuild in (True, False):  # a config rebuilt from the small fields, else the defaults with them set
                try:
                    torch.manual_seed(0)
                    model = small_model(config_class, rebuild)
                    forward_loss(model).backward()  # the architecture trains without the bridge
                    model.zero_grad()
                    break
                except TimedOut:
                    raise
                except Exception as e:  # noqa: BLE001
                    model = None
                    errors.append(f"{type(e).__name__}: {str(e)[:120]}")
            if model is None:
                print(f"BUILD {model_type}: rebuilt: {errors[0]} | defaults set: {errors[1]}", flush=True)
                continue
            weights = gemm_weights(model)
            total = sum(p.numel() for p in weights.values()) or 1
            results = []
            for mode in ("observe", "emulate"):
                count, experts, observed, silent, grouped, error = probe(model, mode)
                share = sum(p.numel() for p in weights.values() if id(p) in observed) / total
                missed = sorted({n.rsplit(".", 1)[0].split(".")[-1] for n, p in weights.items() if id(p) not in observed})
                failed += bool(error)
                results.append(f"{mode} {'FAILED ' + error if error else 'ok'}; {count} layers ({experts} experts), {share:.0%} of GEMM weight elements"
                               + (f", not observed: {', '.join(missed)}" if missed else "")
                               + (f", {grouped} grouped emulated products" if grouped else "")
                               + (f", {len(silent)} without records (e.g. {', '.join(silent[:3])})" if silent and not error else ""))
            print(f"PROBE {model_type}: " + " | ".join(results), flush=True)
        except TimedOut:
            print(f"TIMEOUT {model_type}: over {args.seconds} s", flush=True)
        finally:
            signal.alarm(0)
            torch.cuda.empty_cache()
    print(f"{failed} modes failed", flush=True)


if __name__ == "__main__":
    main()

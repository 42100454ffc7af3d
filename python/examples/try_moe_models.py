"""Every mixture-of-experts causal LM config in the installed `transformers`, built small from its
defaults (a few fields set for size) with random weights: which modules hold experts as 3-D
parameters, the experts implementation transformers picks, and whether two steps observed and two
emulated run, with how many expert layers the bridge found. `BUILD` lines are configs this generic
shrinking could not build (or whose model fails without the bridge): not the bridge's failures.

    python3 python/examples/try_moe_models.py    (a GPU with torch 2.x and transformers 5)
"""
import sys, os, traceback
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch, transformers as tf
from mxscope_bridge import Bridge, default_gemms, gemm_config, run_config
from mxscope_bridge.experts import ExpertSlice
names = [n for n in dir(tf) if n.endswith("Config") and any(k in n.lower() for k in ("moe", "mixtral", "deepseek", "gptoss", "gpt_oss", "dbrx", "jamba", "olmoe", "granitemoe", "llama4text", "qwen3moe", "ernie4_5_moe", "glm4moe", "hunyuan", "minimax", "flexolmo", "longcat", "lfm2moe"))]
print(names)
small = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
             moe_intermediate_size=128, shared_expert_intermediate_size=128, num_experts=4, num_local_experts=4, n_routed_experts=4,
             num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=0, head_dim=32, qk_rope_head_dim=16, qk_nope_head_dim=16,
             v_head_dim=32, kv_lora_rank=32, q_lora_rank=None, decoder_sparse_step=1, mlp_only_layers=[], layer_types=None)
for n in names:
    cls = getattr(tf, n)
    try:
        cfg = cls()
        for k, v in small.items():
            if hasattr(cfg, k):
                setattr(cfg, k, v)
        if getattr(cfg, "layer_types", None) is not None and hasattr(cfg, "num_hidden_layers"):
            cfg.layer_types = cfg.layer_types[:cfg.num_hidden_layers]
        model = tf.AutoModelForCausalLM.from_config(cfg).cuda()
    except Exception as e:
        print(f"BUILD {n}: build failed: {type(e).__name__}: {str(e)[:120]}")
        continue
    try:
        ids = torch.randint(1, 1000, (2, 32), device="cuda")
        with torch.autocast("cuda", torch.bfloat16):
            model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad()
    except Exception as e:
        print(f"BUILD {n}: fails without the bridge: {type(e).__name__}: {str(e)[:100]}")
        continue
    three_d = sorted({type(m).__name__ for m in model.modules() if any(p.dim() == 3 for p in m.parameters(recurse=False))})
    result = []
    for mode in ("observe", "emulate"):
        try:
            b = Bridge(model, run_config(stats_every=1, sketch_size=8, gemms=default_gemms(gemm_config("mxfp4", "hadamard", 32))), emulate=mode == "emulate",
                       serve=False, out_dir=None, print_listening=False, handle_exit=False, log=lambda l: None)
            experts = sum(isinstance(m, ExpertSlice) for _, m, _ in b.layers)
            b.start_run()
            for step in range(2):
                b.begin_step(step)
                ids = torch.randint(1, 1000, (2, 32), device="cuda")
                with torch.autocast("cuda", torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                b.end_step(loss=loss.detach())
                model.zero_grad()
            b.close()
            result.append(f"{mode} ok ({experts} expert layers of {len(b.layers)})")
        except Exception as e:
            result.append(f"{mode} FAILED {type(e).__name__}: {str(e)[:150]} @ " + " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)[-3:]))
            try: b.close()
            except Exception: pass
    print(f"PROBE {n}: 3-D param modules {three_d}; impl {getattr(cfg, '_experts_implementation', None)}; " + "; ".join(result), flush=True)

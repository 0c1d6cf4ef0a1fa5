#!/usr/bin/env python3
"""Baseline for `deepinfer bench`: HF transformers DeepseekV4ForCausalLM on the same GPU and the
same full-width V4-Flash shapes (random bf16 weights, `--layers` main layers, no MTP).

Decode throughput: prefill a random context of `--context` tokens per sequence with the cache,
then time single-token decode steps (median of `--iters`). Rows that do not fit (eager attention
materialises [batch, heads, S, S] scores) are recorded as skipped. Output: JSON rows shaped like
deepinfer's (`kind`, `batch`, `context`, `tokens_per_s`, `engine`).
"""
import argparse
import json
import time

import torch


def make_model(layers):
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    ratios = [0 if l < 2 else (4 if l % 2 == 0 else 128) for l in range(layers)]
    cfg = DeepseekV4Config(num_hidden_layers=layers, compress_ratios=ratios, num_hash_layers=min(3, layers),
                           vocab_size=129280, hidden_size=4096, num_attention_heads=64, head_dim=512,
                           qk_rope_head_dim=64, q_lora_rank=1024, o_groups=8, o_lora_rank=1024,
                           n_routed_experts=256, num_experts_per_tok=6, moe_intermediate_size=2048,
                           index_n_heads=64, index_head_dim=128, index_topk=512, sliding_window=128,
                           rope_scaling={"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                                         "beta_fast": 32, "beta_slow": 1})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = DeepseekV4ForCausalLM(cfg).to(torch.bfloat16)
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--context", default="4096")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import transformers
    rows = []
    model = make_model(args.layers)
    for context in [int(c) for c in args.context.split(",")]:
        for batch in [int(b) for b in args.batch.split(",")]:
            row = {"kind": "decode", "batch": batch, "context": context, "engine": "transformers",
                   "model": {"layers": args.layers, "hidden": 4096}}
            try:
                ids = torch.randint(3, 128000, (batch, context), device="cuda")
                with torch.no_grad():
                    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
                    cache = out.past_key_values
                    nxt = out.logits[:, -1:].argmax(-1)
                    times = []
                    for i in range(args.iters + 1):
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                        torch.cuda.synchronize()
                        if i > 0:
                            times.append(time.perf_counter() - t0)
                        cache = out.past_key_values
                        nxt = out.logits[:, -1:].argmax(-1)
                times.sort()
                t = times[len(times) // 2]
                row.update(step_ms=t * 1e3, tokens_per_s=batch / t)
                print(f"transformers decode batch {batch} context {context}: {t*1e3:.1f} ms/step", flush=True)
            except torch.OutOfMemoryError as e:  # noqa: PERF203
                row["skipped"] = f"out of memory: {str(e)[:120]}"
            torch.cuda.empty_cache()
            rows.append(row)
    json.dump({"engine": "transformers " + transformers.__version__, "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name(0), "rows": rows}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()

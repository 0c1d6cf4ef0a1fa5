#!/usr/bin/env python3
"""Baseline for `deepinfer bench`: HF transformers DeepseekV4ForCausalLM on the same GPU and the
same full-width V4-Flash shapes (random bf16 weights, `--layers` main layers, no MTP).

Decode throughput: fill the cache with a random context of `--context` tokens per sequence, then
time single-token decode steps (median of `--iters`). The cache is filled in chunks of at most
`--fill-tokens` / batch positions (eager attention materialises [batch, heads, chunk, S] F32 scores:
a batch-32 4K context in one forward would need ~140 GB of them). Prefill throughput: one forward of
a random `--prefill` prompt at batch 1 (median of `--iters`, after a warm-up). A row that does not
fit or fails is recorded as skipped with the reason, and the other rows still run. Output: JSON rows
shaped like deepinfer's (`kind`, `batch`, `context`, `tokens_per_s`, `engine`).
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
    # Built in BF16 from the start: F32 parameters first (then .to(bfloat16)) need twice the
    # memory at construction — 103 GB for 4 layers' experts, which an 80 GB H100 does not hold
    # (session 41: every baseline row out of memory there).
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = DeepseekV4ForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default_dtype)
    model = model.to(torch.bfloat16)
    model.eval()
    return model


def fill_cache(model, ids, fill_tokens):
    """Runs the context through the model in position chunks; returns the last output."""
    batch, context = ids.shape
    chunk = max(128, fill_tokens // batch // 128 * 128)
    out, cache = None, None
    for begin in range(0, context, chunk):
        out = model(input_ids=ids[:, begin:begin + chunk], past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
    return out


def time_decode(model, batch, context, iters, fill_tokens):
    ids = torch.randint(3, 128000, (batch, context), device="cuda")
    with torch.no_grad():
        out = fill_cache(model, ids, fill_tokens)
        cache = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        times = []
        for i in range(iters + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            torch.cuda.synchronize()
            if i > 0:
                times.append(time.perf_counter() - t0)
            cache = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
    return sorted(times)[len(times) // 2]


def time_prefill(model, prompt, iters):
    ids = torch.randint(3, 128000, (1, prompt), device="cuda")
    times = []
    with torch.no_grad():
        for i in range(iters + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
            torch.cuda.synchronize()
            if i > 0:
                times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def measure(row, label, fn):
    """Runs one measurement into `row` (step_ms, tokens_per_s) or records why it was skipped."""
    try:
        t, tokens = fn()
        row.update(step_ms=t * 1e3, tokens_per_s=tokens / t)
        print(f"transformers {label}: {t*1e3:.1f} ms", flush=True)
    except torch.OutOfMemoryError as e:
        row["skipped"] = f"out of memory: {str(e)[:120]}"
    except Exception as e:  # noqa: BLE001 - any failure of one shape is recorded, the others still run
        row["skipped"] = f"{type(e).__name__}: {str(e)[:200]}"
    if "skipped" in row:
        print(f"transformers {label}: skipped ({row['skipped']})", flush=True)
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--context", default="4096")
    ap.add_argument("--prefill", default="", help="prompt lengths to time at batch 1, e.g. 8192")
    ap.add_argument("--fill-tokens", type=int, default=8192, help="tokens per cache-filling forward")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import transformers
    rows = []
    model = make_model(args.layers)
    shape = {"layers": args.layers, "hidden": 4096}
    for context in [int(c) for c in args.context.split(",")]:
        for batch in [int(b) for b in args.batch.split(",")]:
            row = {"kind": "decode", "batch": batch, "context": context, "engine": "transformers", "model": shape}
            measure(row, f"decode batch {batch} context {context} (ms/step)",
                    lambda: (time_decode(model, batch, context, args.iters, args.fill_tokens), batch))
            rows.append(row)
    for prompt in [int(p) for p in args.prefill.split(",") if p]:
        row = {"kind": "prefill", "batch": 1, "context": prompt, "engine": "transformers", "model": shape}
        measure(row, f"prefill {prompt} tokens (ms)", lambda: (time_prefill(model, prompt, min(args.iters, 3)), prompt))
        rows.append(row)
    json.dump({"engine": "transformers " + transformers.__version__, "torch": torch.__version__,
               "gpu": torch.cuda.get_device_name(0), "rows": rows}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()

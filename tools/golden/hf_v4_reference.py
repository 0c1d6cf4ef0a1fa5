#!/usr/bin/env python3
"""Golden fixtures for DeepSeek-V4-Flash from an independent implementation: HF transformers'
DeepseekV4ForCausalLM (run on the H200 machine: PyTorch 2.11, transformers 5.17).

It loads a synthetic checkpoint written by `deepinfer gen-checkpoint` in the official format,
preferably letting transformers read the quantized files itself (FP8 blocks, FP4 experts), and
falls back to dequantising them here (independent Python reader) if that path cannot run; the
output records which path was used. It then runs fixed prompts in float32 and writes:

  golden.safetensors  per prompt: ids, top-64 logits/ids at every position, log-sum-exp of every
                      position, full logits at a few positions; per-layer hidden states of prompt 0
                      at selected positions; a few weights as transformers holds them
  golden.json         provenance and the weight comparison against our loader's dumps

Usage (see tools/golden/README.md): hf_v4_reference.py --ckpt DIR --ours DIR --out DIR
"""
import argparse
import hashlib
import json
import os
import re
import sys
import traceback

import numpy as np
import torch

PROMPTS = [("p0", 300, 1234), ("p1", 40, 99), ("p2", 530, 7)]  # name, length, seed
HIDDEN_POSITIONS = [0, 1, 3, 4, 7, 66, 67, 127, 128, 129, 255, 256, 299]
FULL_LOGIT_POSITIONS = {"p0": [128, 299], "p1": [39], "p2": [529]}
TOPK = 64
# Weights compared bit for bit with our loader (official name, rows dumped by deepinfer).
COMPARE = [
    "embed.weight", "head.weight", "layers.0.attn.wq_a.weight", "layers.0.attn.wq_b.weight",
    "layers.2.attn.wo_a.weight", "layers.3.attn.wo_b.weight", "layers.2.attn.indexer.wq_b.weight",
    "layers.2.attn.compressor.wkv.weight", "layers.0.ffn.experts.0.w1.weight",
    "layers.4.ffn.experts.7.w2.weight", "layers.5.ffn.experts.15.w3.weight",
    "layers.1.ffn.shared_experts.w2.weight", "layers.3.hc_attn_fn", "layers.6.attn.attn_sink",
]
COMPARE_ROWS = 16


def prompt_ids(n, seed, vocab):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(3, min(vocab, 128000), size=n)]


# ---------------------------------------------------------------- independent reader (path B)
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


def dequant_fp8(w, s, block):
    w = w.to(torch.float32)
    s = s.to(torch.float32)
    bo, bi = block
    s = s.repeat_interleave(bo, 0)[: w.shape[0]].repeat_interleave(bi, 1)[:, : w.shape[1]]
    return w * s


def dequant_fp4(w, s):
    b = w.view(torch.uint8).to(torch.int64)
    lo, hi = E2M1[b & 0xF], E2M1[b >> 4]
    x = torch.stack([lo, hi], dim=-1).reshape(w.shape[0], w.shape[1] * 2)
    return x * s.to(torch.float32).repeat_interleave(32, 1)


def read_official(ckpt, config):
    from safetensors import safe_open
    index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
    raw = {}
    for shard in sorted(set(index["weight_map"].values())):
        with safe_open(os.path.join(ckpt, shard), framework="pt") as f:
            for k in f.keys():
                raw[k] = f.get_tensor(k)
    block = config["quantization_config"]["weight_block_size"]
    out = {}
    for k, v in raw.items():
        if k.endswith(".scale"):
            continue
        sk = k[: -len(".weight")] + ".scale" if k.endswith(".weight") else None
        if sk in raw and v.dtype == torch.int8:
            out[k] = dequant_fp4(v, raw[sk])
        elif sk in raw:
            out[k] = dequant_fp8(v, raw[sk], block)
        elif v.dtype in (torch.bfloat16, torch.float32):
            out[k] = v.to(torch.float32)
        else:
            out[k] = v
    return out


RENAMES = [
    (r"^embed\.weight$", "model.embed_tokens.weight"), (r"^head\.weight$", "lm_head.weight"),
    (r"^norm\.weight$", "model.norm.weight"), (r"^hc_head_fn$", "model.hc_head.hc_fn"),
    (r"^hc_head_base$", "model.hc_head.hc_base"), (r"^hc_head_scale$", "model.hc_head.hc_scale"),
    (r"^layers\.(\d+)\.hc_attn_(fn|base|scale)$", r"model.layers.\1.attn_hc.\2"),
    (r"^layers\.(\d+)\.hc_ffn_(fn|base|scale)$", r"model.layers.\1.ffn_hc.\2"),
    (r"^layers\.(\d+)\.attn_norm\.weight$", r"model.layers.\1.input_layernorm.weight"),
    (r"^layers\.(\d+)\.ffn_norm\.weight$", r"model.layers.\1.post_attention_layernorm.weight"),
    (r"^layers\.(\d+)\.attn\.attn_sink$", r"model.layers.\1.self_attn.sinks"),
    (r"^layers\.(\d+)\.attn\.wq_a\.weight$", r"model.layers.\1.self_attn.q_a_proj.weight"),
    (r"^layers\.(\d+)\.attn\.q_norm\.weight$", r"model.layers.\1.self_attn.q_a_norm.weight"),
    (r"^layers\.(\d+)\.attn\.wq_b\.weight$", r"model.layers.\1.self_attn.q_b_proj.weight"),
    (r"^layers\.(\d+)\.attn\.wkv\.weight$", r"model.layers.\1.self_attn.kv_proj.weight"),
    (r"^layers\.(\d+)\.attn\.kv_norm\.weight$", r"model.layers.\1.self_attn.kv_norm.weight"),
    (r"^layers\.(\d+)\.attn\.wo_a\.weight$", r"model.layers.\1.self_attn.o_a_proj.weight"),
    (r"^layers\.(\d+)\.attn\.wo_b\.weight$", r"model.layers.\1.self_attn.o_b_proj.weight"),
    (r"^layers\.(\d+)\.attn\.compressor\.ape$", r"model.layers.\1.self_attn.compressor.position_bias"),
    (r"^layers\.(\d+)\.attn\.compressor\.wkv\.weight$", r"model.layers.\1.self_attn.compressor.kv_proj.weight"),
    (r"^layers\.(\d+)\.attn\.compressor\.wgate\.weight$", r"model.layers.\1.self_attn.compressor.gate_proj.weight"),
    (r"^layers\.(\d+)\.attn\.compressor\.norm\.weight$", r"model.layers.\1.self_attn.compressor.kv_norm.weight"),
    (r"^layers\.(\d+)\.attn\.indexer\.wq_b\.weight$", r"model.layers.\1.self_attn.compressor.indexer.q_b_proj.weight"),
    (r"^layers\.(\d+)\.attn\.indexer\.weights_proj\.weight$",
     r"model.layers.\1.self_attn.compressor.indexer.scorer.weights_proj.weight"),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.ape$", r"model.layers.\1.self_attn.compressor.indexer.position_bias"),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.wkv\.weight$", r"model.layers.\1.self_attn.compressor.indexer.kv_proj.weight"),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.wgate\.weight$",
     r"model.layers.\1.self_attn.compressor.indexer.gate_proj.weight"),
    (r"^layers\.(\d+)\.attn\.indexer\.compressor\.norm\.weight$", r"model.layers.\1.self_attn.compressor.indexer.kv_norm.weight"),
    (r"^layers\.(\d+)\.ffn\.gate\.weight$", r"model.layers.\1.mlp.gate.weight"),
    (r"^layers\.(\d+)\.ffn\.gate\.bias$", r"model.layers.\1.mlp.gate.e_score_correction_bias"),
    (r"^layers\.(\d+)\.ffn\.gate\.tid2eid$", r"model.layers.\1.mlp.gate.tid2eid"),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w1\.weight$", r"model.layers.\1.mlp.shared_experts.gate_proj.weight"),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w3\.weight$", r"model.layers.\1.mlp.shared_experts.up_proj.weight"),
    (r"^layers\.(\d+)\.ffn\.shared_experts\.w2\.weight$", r"model.layers.\1.mlp.shared_experts.down_proj.weight"),
]


def hf_name(name):
    for pat, rep in RENAMES:
        if re.match(pat, name):
            return re.sub(pat, rep, name)
    return None


def hf_value(state, name, n_experts_f):
    """The tensor transformers holds for official parameter `name` (experts are stacked)."""
    m = re.match(r"^layers\.(\d+)\.ffn\.experts\.(\d+)\.(w1|w2|w3)\.weight$", name)
    if m:
        l, e, w = m.group(1), int(m.group(2)), m.group(3)
        if w == "w2":
            return state[f"model.layers.{l}.mlp.experts.down_proj"][e]
        gu = state[f"model.layers.{l}.mlp.experts.gate_up_proj"][e]
        return gu[:n_experts_f] if w == "w1" else gu[n_experts_f:]
    return state[hf_name(name)]


def build_state_dict(official, config):
    F = config["moe_intermediate_size"]
    sd = {}
    experts = {}
    for k, v in official.items():
        if k.startswith("mtp."):
            continue
        m = re.match(r"^layers\.(\d+)\.ffn\.experts\.(\d+)\.(w1|w2|w3)\.weight$", k)
        if m:
            experts.setdefault(int(m.group(1)), {})[(int(m.group(2)), m.group(3))] = v
            continue
        n = hf_name(k)
        if n is None:
            raise KeyError(f"no transformers name for {k}")
        sd[n] = v
    for l, ex in experts.items():
        E = 1 + max(e for e, _ in ex)
        sd[f"model.layers.{l}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([ex[(e, "w1")], ex[(e, "w3")]], 0) for e in range(E)])
        sd[f"model.layers.{l}.mlp.experts.down_proj"] = torch.stack([ex[(e, "w2")] for e in range(E)])
    del F
    return sd


def make_config(config):
    """DeepseekV4Config from our config.json, dropping keys this transformers version rejects."""
    from transformers import DeepseekV4Config
    cfg_dict = {k: v for k, v in config.items() if k not in ("quantization_config",)}
    for _ in range(20):
        try:
            return DeepseekV4Config(**cfg_dict)
        except TypeError as e:
            m = re.search(r"'(\w+)'", str(e))
            if not m or m.group(1) not in cfg_dict:
                raise
            print("config: dropping key rejected by transformers:", m.group(1))
            cfg_dict.pop(m.group(1))
    raise RuntimeError("could not build DeepseekV4Config")


def load_manual(ckpt, config):
    from transformers import DeepseekV4ForCausalLM
    cfg = make_config(config)
    model = DeepseekV4ForCausalLM(cfg).to(torch.float32)
    sd = build_state_dict(read_official(ckpt, config), config)
    result = model.load_state_dict(sd, strict=False)
    missing = [k for k in result.missing_keys if "inv_freq" not in k]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"manual load: missing {missing[:10]} unexpected {result.unexpected_keys[:10]}")
    return model


def load_transformers_native(ckpt):
    """Let transformers read the FP8/FP4 files itself and dequantise them."""
    from transformers import AutoModelForCausalLM
    attempts = []
    try:
        from transformers import FineGrainedFP8Config
        attempts.append(("FineGrainedFP8Config(dequantize=True), cpu",
                         dict(quantization_config=FineGrainedFP8Config(dequantize=True), device_map="cpu")))
        attempts.append(("FineGrainedFP8Config(dequantize=True), cuda",
                         dict(quantization_config=FineGrainedFP8Config(dequantize=True), device_map="cuda")))
    except Exception as e:  # noqa: BLE001
        print("no FineGrainedFP8Config:", e)
    attempts.append(("default quantizer, cuda", dict(device_map="cuda")))
    errors = []
    for label, kw in attempts:
        try:
            model, info = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32, output_loading_info=True, **kw)
            bad = [n for n, p in model.named_parameters() if p.dtype not in (torch.float32, torch.bfloat16, torch.int64)]
            missing = [k for k in info.get("missing_keys", []) if "inv_freq" not in k]
            if bad or missing or info.get("mismatched_keys"):
                raise RuntimeError(f"non-float params {bad[:5]}, missing {missing[:10]}, mismatched "
                                   f"{info.get('mismatched_keys', [])[:5]}, unexpected {list(info.get('unexpected_keys', []))[:5]}")
            return model.to("cpu").to(torch.float32), label, errors
        except Exception as e:  # noqa: BLE001
            errors.append(f"{label}: {type(e).__name__}: {e}")
            traceback.print_exc()
    return None, None, errors


def use_lowest_index_tie_break():
    """Make the indexer's top-k pick the lowest index among equal scores.

    The reference leaves ties implementation-defined (model_v4_flash.md §4.7); with the tiny model's
    4 indexer heads, scores of exactly 0 (every head's ReLU at 0) are common, and torch.topk's
    order among them is unspecified. DeepInfer (like DS4) keeps the lowest index; the golden uses the
    same rule so that only real numerical differences remain.
    """
    import transformers.models.deepseek_v4.modeling_deepseek_v4 as mv4

    def stable_topk(self, k, dim=-1, largest=True, sorted=True):
        assert largest
        vals, idx = torch.sort(self, dim=dim, descending=True, stable=True)
        return torch.return_types.topk((vals.narrow(dim, 0, k), idx.narrow(dim, 0, k)))

    original = mv4.DeepseekV4Indexer.forward

    def forward(self, *args, **kwargs):
        saved = torch.Tensor.topk
        torch.Tensor.topk = stable_topk
        try:
            return original(self, *args, **kwargs)
        finally:
            torch.Tensor.topk = saved

    mv4.DeepseekV4Indexer.forward = forward


def main():
    if "--list-compare" in sys.argv:
        print("\n".join(COMPARE))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--ours", required=True, help="dir with our loader's dequantised dumps (<name>.npy)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    import transformers
    config = json.load(open(os.path.join(args.ckpt, "config.json")))
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "ckpt_config": config,
            "prompts": {}, "dtype": "float32", "device": "cpu"}

    use_lowest_index_tie_break()
    meta["indexer_tie_break"] = "lowest index (stable sort) patched into DeepseekV4Indexer"
    model, path, errors = load_transformers_native(args.ckpt)
    meta["native_load_errors"] = errors
    if model is None:
        model = load_manual(args.ckpt, config)
        path = "dequantised in this script (independent Python reader), loaded with load_state_dict"
    meta["load_path"] = path
    print("load path:", path)
    model.eval()
    state = {k: v.detach().to(torch.float32) for k, v in model.state_dict().items()}

    # Our loader vs transformers, bit for bit.
    cmp = {}
    golden = {}
    F = config["moe_intermediate_size"]
    for name in COMPARE:
        theirs = hf_value(state, name, F).numpy()
        theirs = theirs.reshape(theirs.shape[0], -1)[:COMPARE_ROWS] if theirs.ndim > 1 else theirs
        ours_path = os.path.join(args.ours, name + ".npy")
        entry = {"shape": list(theirs.shape)}
        if os.path.exists(ours_path):
            ours = np.load(ours_path)
            ours = ours.reshape(ours.shape[0], -1)[:COMPARE_ROWS] if ours.ndim > 1 else ours
            entry["bitwise_equal"] = bool(ours.shape == theirs.shape and
                                          np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)))
            entry["max_abs_diff"] = float(np.max(np.abs(ours - theirs))) if ours.shape == theirs.shape else None
        cmp[name] = entry
        golden["weights." + name] = torch.from_numpy(np.ascontiguousarray(theirs.astype(np.float32)))
    meta["weight_compare"] = cmp
    print(json.dumps(cmp, indent=1))

    hidden = {}
    hooks = []
    for i, layer in enumerate(model.model.layers):
        hooks.append(layer.register_forward_hook(
            lambda mod, inp, out, i=i: hidden.__setitem__(i, (out[0] if isinstance(out, tuple) else out).detach())))
    vocab = config["vocab_size"]
    for name, n, seed in PROMPTS:
        ids = prompt_ids(n, seed, vocab)
        hidden.clear()
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=0)
        logits = out.logits[0].to(torch.float32)  # [S, V]
        top = torch.topk(logits, TOPK, dim=-1)
        golden[f"{name}.ids"] = torch.tensor(ids, dtype=torch.int32)
        golden[f"{name}.topk_ids"] = top.indices.to(torch.int32)
        golden[f"{name}.topk_logits"] = top.values.contiguous()
        golden[f"{name}.lse"] = torch.logsumexp(logits.double(), dim=-1).to(torch.float32)
        pos = FULL_LOGIT_POSITIONS[name]
        golden[f"{name}.full_positions"] = torch.tensor(pos, dtype=torch.int32)
        golden[f"{name}.full_logits"] = logits[pos].contiguous()
        if name == "p0":
            hp = [p for p in HIDDEN_POSITIONS if p < n]
            golden["p0.hidden_positions"] = torch.tensor(hp, dtype=torch.int32)
            golden["p0.hidden"] = torch.stack([hidden[i][0, hp].to(torch.float32) for i in range(len(model.model.layers))]).contiguous()
        meta["prompts"][name] = {"length": n, "seed": seed, "argmax_last": int(logits[-1].argmax())}
        print(name, "done, argmax last", int(logits[-1].argmax()))
    for h in hooks:
        h.remove()

    os.makedirs(args.out, exist_ok=True)
    from safetensors.torch import save_file
    save_file(golden, os.path.join(args.out, "golden.safetensors"), metadata={"format": "pt"})
    shards = {}
    for f in sorted(os.listdir(args.ckpt)):
        if f.endswith(".safetensors"):
            shards[f] = hashlib.sha256(open(os.path.join(args.ckpt, f), "rb").read()).hexdigest()
    meta["checkpoint_sha256"] = shards
    json.dump(meta, open(os.path.join(args.out, "golden.json"), "w"), indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    sys.exit(main())

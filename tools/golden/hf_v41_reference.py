#!/usr/bin/env python3
"""Golden fixtures for DeepSeek-V4.1-Flash from an independent implementation: HF transformers'
main-branch V4.1 port (model_v41_flash.md §12 update), run on the H200 machine (PyTorch 2.11,
transformers 5.17.0, which lacks V4.1 itself).

How the V4.1 port is obtained (not part of this repository, never vendored): three files of
huggingface/transformers, read from the public repository and placed outside our tree under
.carry/hf_v41/ (see tools/golden/run_v41_golden_on_device.sh):

  src/transformers/models/deepseek_v41/__init__.py                  @ 34890d8dd52aed77d8faefc1825c5f204cc59591
  src/transformers/models/deepseek_v41/configuration_deepseek_v41.py @ 0a2080b43eb64e6d448186a4f3f0bc9c618f4797
  src/transformers/models/deepseek_v41/modeling_deepseek_v41.py      @ 0a2080b43eb64e6d448186a4f3f0bc9c618f4797

This script copies them into a temporary package whose relative imports (`from ...x`, `from ..auto`)
are rewritten to the installed `transformers.x`, applies the one cache patch §12 describes (5.17's
cache_utils.get_layer_types_and_kwargs passes `config` only to V4's layer types; wrap it so that
`shared_compressed_attention` layers get it too), and then:

  * reads our synthetic checkpoint (deepinfer gen-checkpoint --config tiny-v41) and DEQUANTISES it
    here (independent Python reader: FP8 E4M3 with 32x32 UE8M0 blocks, FP4 E2M1 experts with UE8M0
    per 32, Engram rows FP8 with UE8M0 per 32) — the port's quantized-checkpoint loading paths were
    never exercised (§12), so they are not relied on; golden.json says so in `load_path`;
  * binds the Engram hash state to OUR synthetic token map (engram_hash.safetensors sidecar,
    token_map[i] = i // 2, compressed vocabulary 256) instead of a tokenizer: both sides hash the
    same compressed ids, as §12's caveat requires;
  * runs float32 prompts longer than the candidate pool (3 blocks x 2) and the window (8) with the
    CACHED path (`use_cache=True`; the port's use_cache=False path is wrong with > 1 KV source),
    exact prefill (the port has no truncation); the indexer's top-k uses a stable sort (lowest index
    wins ties, as DeepInfer does);
  * writes golden.safetensors / golden.json (same layout as the V4 golden, tests/fixtures/golden_v41/).

Usage: hf_v41_reference.py --port DIR --ckpt DIR --ours DIR --out DIR   (--list-compare: tensor names)
DSpark (mtp.*) and vision tensors are not in the port and are ignored here.
"""
import argparse
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import torch

PROMPTS = [("p0", 80, 1234), ("p1", 33, 99), ("p2", 150, 7)]  # name, length, seed (33: odd = open group)
HIDDEN_POSITIONS = [0, 1, 2, 3, 7, 8, 9, 15, 16, 31, 32, 63, 64, 79]
FULL_LOGIT_POSITIONS = {"p0": [8, 79], "p1": [32], "p2": [149]}
TOPK = 64
COMPARE = [
    "embed.weight", "head.weight", "layers.0.attn.wq_a.weight", "layers.3.attn.wq_b.weight",
    "layers.2.attn.wo_a.weight", "layers.7.attn.wo_b.weight", "layers.8.attn.indexer.wq_b.weight",
    "layers.2.attn.compressor.wkv.weight", "layers.6.attn.indexer.wk.weight",
    "layers.0.ffn.experts.0.w1.weight", "layers.5.ffn.experts.7.w2.weight", "layers.11.ffn.shared_experts.w3.weight",
    "layers.1.engram.embed.weight", "layers.4.engram.wkv.weight", "layers.4.engram.q_weight",
    "layers.3.hc_attn_fn", "layers.9.attn.attn_sink", "layers.10.ffn.gate.bias_vl",
]
COMPARE_ROWS = 16
PORT_FILES = ["__init__.py", "configuration_deepseek_v41.py", "modeling_deepseek_v41.py"]


def prompt_ids(n, seed, vocab):
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(3, vocab, size=n)]


# ------------------------------------------------------------------- the port as a package
def rewrite_relative_imports(src):
    """`from ...x import` -> `from transformers.x import`, `from ... import` -> `from transformers
    import`, `from ..x import` -> `from transformers.models.x import`; `from .x` stays (same package)."""
    src = re.sub(r"^(\s*)from \.\.\.(?=\w)", r"\1from transformers.", src, flags=re.M)
    src = re.sub(r"^(\s*)from \.\.\. import", r"\1from transformers import", src, flags=re.M)
    src = re.sub(r"^(\s*)from \.\.(?=\w)", r"\1from transformers.models.", src, flags=re.M)
    return re.sub(r"^(\s*)from \.\. import", r"\1from transformers.models import", src, flags=re.M)


def import_port(port_dir):
    """Copies the three files into <tmp>/deepseek_v41_port/ with absolute transformers imports."""
    root = tempfile.mkdtemp(prefix="hf_v41_")
    pkg = os.path.join(root, "deepseek_v41_port")
    os.makedirs(pkg)
    for name in PORT_FILES:
        src = open(os.path.join(port_dir, name)).read()
        src = rewrite_relative_imports(src)
        open(os.path.join(pkg, name), "w").write(src)
    sys.path.insert(0, root)
    return importlib.import_module("deepseek_v41_port.modeling_deepseek_v41"), \
        importlib.import_module("deepseek_v41_port.configuration_deepseek_v41")


def patch_cache(modeling):
    """§12: 5.17 gives `config` only to V4's compressed layer types; V4.1's KV sources need it too."""
    import transformers.cache_utils as cu
    original = cu.get_layer_types_and_kwargs

    def wrapped(config):
        layer_types, kwargs = original(config)
        if "shared_compressed_attention" in layer_types:
            kwargs = dict(kwargs, config=config)
        return layer_types, kwargs

    cu.get_layer_types_and_kwargs = wrapped
    mapping = getattr(cu, "DYNAMIC_LAYER_TYPE_MAPPING", None)
    if isinstance(mapping, dict):
        mapping.setdefault("shared_compressed_attention", modeling.DeepseekV41CSACache)
    return "cache_utils.get_layer_types_and_kwargs wrapped: config passed for shared_compressed_attention"


def use_lowest_index_tie_break(modeling):
    """Stable descending sort instead of torch.topk inside the indexer (top-k and candidate blocks)."""
    def stable_topk(self, k, dim=-1, largest=True, sorted=True):
        assert largest
        vals, idx = torch.sort(self, dim=dim, descending=True, stable=True)
        return torch.return_types.topk((vals.narrow(dim, 0, k), idx.narrow(dim, 0, k)))

    original = modeling.DeepseekV41Indexer.forward

    def forward(self, *args, **kwargs):
        saved = torch.Tensor.topk
        torch.Tensor.topk = stable_topk
        try:
            return original(self, *args, **kwargs)
        finally:
            torch.Tensor.topk = saved

    modeling.DeepseekV41Indexer.forward = forward


# ------------------------------------------------------------------- independent reader
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


def dequant_fp8(w, s, bo, bi):
    w = w.to(torch.float32)
    s = s.to(torch.float32)
    s = s.repeat_interleave(bo, 0)[: w.shape[0]].repeat_interleave(bi, 1)[:, : w.shape[1]]
    return w * s


def dequant_fp4(w, s):
    b = w.view(torch.uint8).to(torch.int64)
    x = torch.stack([E2M1[b & 0xF], E2M1[b >> 4]], dim=-1).reshape(w.shape[0], w.shape[1] * 2)
    return x * s.to(torch.float32).repeat_interleave(32, 1)


def read_checkpoint(ckpt, quant):
    from safetensors import safe_open
    index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
    raw = {}
    for shard in sorted(set(index["weight_map"].values())):
        with safe_open(os.path.join(ckpt, shard), framework="pt") as f:
            for k in f.keys():
                raw[k] = f.get_tensor(k)
    bo, bi = quant["weight_block_size"]
    out = {}
    for k, v in raw.items():
        if k.endswith(".scale"):
            continue
        sk = k[: -len(".weight")] + ".scale" if k.endswith(".weight") else None
        if sk in raw and v.dtype == torch.int8:
            out[k] = dequant_fp4(v, raw[sk])
        elif sk in raw and k.endswith("engram.embed.weight"):
            out[k] = dequant_fp8(v, raw[sk], 1, 32)  # rows: one UE8M0 scale per 32 values
        elif sk in raw:
            out[k] = dequant_fp8(v, raw[sk], bo, bi)
        else:
            out[k] = v.to(torch.float32)
    return out


def hf_name(name):
    if name == "head.weight":
        return "lm_head.weight"
    return "model." + name


def build_state_dict(official):
    sd = {}
    for k, v in official.items():
        if k.startswith(("mtp.", "vision.", "aligner.", "image_")):
            continue  # not in the port
        sd[hf_name(k)] = v
        if k.endswith("engram.embed.weight"):
            sd[hf_name(k)[: -len("weight")] + "scale"] = torch.ones(v.shape[0], v.shape[1] // 32)  # unused in float
    return sd


def make_config(configuration, config):
    text = dict(config["text_config"])
    text["engram_pad_id"] = text.pop("engram_pad_token_id", 2)
    cfg = {k: v for k, v in config.items() if k not in ("quantization_config",)}
    cfg["text_config"] = text
    for _ in range(30):
        try:
            return configuration.DeepseekV41Config(**cfg)
        except TypeError as e:
            m = re.search(r"'(\w+)'", str(e))
            if not m:
                raise
            key = m.group(1)
            for d in (cfg, cfg["text_config"], cfg.get("vision_config") or {}):
                if key in d:
                    print("config: dropping key rejected by the port:", key)
                    d.pop(key)
                    break
            else:
                raise
    raise RuntimeError("could not build DeepseekV41Config")


def bind_token_map(modeling, model, ckpt):
    from safetensors.torch import load_file
    side = load_file(os.path.join(ckpt, "engram_hash.safetensors"))
    token_map = [int(x) for x in side["token_map"].tolist()]
    modeling.build_compressed_token_map = lambda tokenizer: (token_map, max(token_map) + 1)
    model.model.bind_tokenizer(None)
    hs = model.model.engram_hash_state
    ours = {"primes": side["primes"], "offsets": side["offsets"], "multipliers": side["multipliers"]}
    theirs = {"primes": hs.primes.reshape(hs.primes.shape[0], -1), "offsets": hs.offsets, "multipliers": hs.multipliers}
    return {k: bool(torch.equal(ours[k].to(torch.int64), theirs[k].to(torch.int64))) for k in ours} | {
        "pad_id": int(hs.pad_id) == int(side["pad_id"][0])}


def main():
    if "--list-compare" in sys.argv:
        print("\n".join(COMPARE))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", required=True, help="dir with the three deepseek_v41 files of transformers main")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--ours", required=True, help="dir with our loader's dequantised dumps (<name>.npy)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    import transformers
    modeling, configuration = import_port(args.port)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "dtype": "float32", "device": "cpu",
            "port_files": {n: hashlib.sha256(open(os.path.join(args.port, n), "rb").read()).hexdigest() for n in PORT_FILES},
            "cache_patch": patch_cache(modeling), "prompts": {}}
    use_lowest_index_tie_break(modeling)
    meta["indexer_tie_break"] = "lowest index (stable sort) patched into DeepseekV41Indexer (top-k and candidate blocks)"
    config = json.load(open(os.path.join(args.ckpt, "config.json")))
    meta["ckpt_config"] = config
    model = modeling.DeepseekV41ForCausalLM(make_config(configuration, config)).to(torch.float32)
    result = model.load_state_dict(build_state_dict(read_checkpoint(args.ckpt, config["quantization_config"])), strict=False)
    missing = [k for k in result.missing_keys if "inv_freq" not in k]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"load: missing {missing[:10]} unexpected {result.unexpected_keys[:10]}")
    meta["load_path"] = "dequantised in this script (independent Python reader), load_state_dict(strict) into the port"
    meta["engram_constants_equal"] = bind_token_map(modeling, model, args.ckpt)
    print("engram constants equal:", meta["engram_constants_equal"])
    model.eval()
    state = {k: v.detach().to(torch.float32) for k, v in model.state_dict().items()}

    golden, cmp = {}, {}
    for name in COMPARE:
        theirs = state[hf_name(name)].numpy()
        theirs = theirs.reshape(theirs.shape[0], -1)[:COMPARE_ROWS] if theirs.ndim > 1 else theirs
        entry = {"shape": list(theirs.shape)}
        ours_path = os.path.join(args.ours, name + ".npy")
        if os.path.exists(ours_path):
            ours = np.load(ours_path)
            ours = ours.reshape(ours.shape[0], -1)[:COMPARE_ROWS] if ours.ndim > 1 else ours
            same = ours.shape == theirs.shape
            entry["bitwise_equal"] = bool(same and np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)))
            entry["max_abs_diff"] = float(np.max(np.abs(ours - theirs))) if same else None
        cmp[name] = entry
        golden["weights." + name] = torch.from_numpy(np.ascontiguousarray(theirs.astype(np.float32)))
    meta["weight_compare"] = cmp

    hidden = {}
    for i, layer in enumerate(model.model.layers):
        layer.register_forward_hook(lambda mod, inp, out, i=i: hidden.__setitem__(i, (out[0] if isinstance(out, tuple) else out).detach()))
    vocab = config["text_config"]["vocab_size"]
    for name, n, seed in PROMPTS:
        ids = prompt_ids(n, seed, vocab)
        hidden.clear()
        model.model.bind_tokenizer(None)  # fresh Engram history per prompt
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids]), use_cache=True)
        logits = out.logits[0].to(torch.float32)
        top = torch.topk(logits, TOPK, dim=-1)
        golden[f"{name}.ids"] = torch.tensor(ids, dtype=torch.int32)
        golden[f"{name}.topk_ids"] = top.indices.to(torch.int32)
        golden[f"{name}.topk_logits"] = top.values.contiguous()
        golden[f"{name}.lse"] = torch.logsumexp(logits.double(), dim=-1).to(torch.float32)
        pos = FULL_LOGIT_POSITIONS[name]
        golden[f"{name}.full_positions"] = torch.tensor(pos, dtype=torch.int32)
        golden[f"{name}.full_logits"] = logits[pos].contiguous()
        if name == "p1":  # every position of the short prompt: localises any divergence by layer
            golden["p1.hidden_positions"] = torch.arange(n, dtype=torch.int32)
            golden["p1.hidden"] = torch.stack([hidden[i][0].to(torch.float32) for i in range(len(model.model.layers))]).contiguous()
        if name == "p0":
            hp = [p for p in HIDDEN_POSITIONS if p < n]
            golden["p0.hidden_positions"] = torch.tensor(hp, dtype=torch.int32)
            golden["p0.hidden"] = torch.stack([hidden[i][0, hp].to(torch.float32) for i in range(len(model.model.layers))]).contiguous()
            # The port's own consistency on the cached path: chunked prefill 37 + 43 vs one shot.
            model.model.bind_tokenizer(None)
            cache = None
            chunks = []
            with torch.no_grad():
                for a, b in ((0, 37), (37, n)):
                    o = model(input_ids=torch.tensor([ids[a:b]]), past_key_values=cache, use_cache=True,
                              position_ids=torch.arange(a, b).unsqueeze(0))
                    cache = o.past_key_values
                    chunks.append(o.logits[0].to(torch.float32))
            meta["port_chunked_vs_one_shot_max_abs"] = float((torch.cat(chunks) - logits).abs().max())
        meta["prompts"][name] = {"length": n, "seed": seed, "argmax_last": int(logits[-1].argmax())}
        print(name, "done, argmax last", int(logits[-1].argmax()))

    os.makedirs(args.out, exist_ok=True)
    from safetensors.torch import save_file
    save_file(golden, os.path.join(args.out, "golden.safetensors"), metadata={"format": "pt"})
    meta["checkpoint_sha256"] = {f: hashlib.sha256(open(os.path.join(args.ckpt, f), "rb").read()).hexdigest()
                                 for f in sorted(os.listdir(args.ckpt)) if f.endswith(".safetensors")}
    json.dump(meta, open(os.path.join(args.out, "golden.json"), "w"), indent=1)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

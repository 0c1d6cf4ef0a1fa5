#!/usr/bin/env python3
"""Diagnostic for golden differences on V4.1 (runs on the H200 machine like hf_v41_reference.py):
runs transformers' V4.1 port on prompt p1 of the golden set and saves, per layer 1-4, the attention
module's input and output, the MoE output, and the input/output of the first six FP8 window-KV
quantizer calls (one per layer, in layer order) to OUT/p1_hf.npz. Compare them with the same
tensors dumped from DeepInfer to find the first value that differs (this is how the p1 FP8
rounding flip in docs/v41.md was found).
Usage: trace_v41_port.py PORT_DIR CKPT_DIR OUT_DIR   (CKPT: deepinfer gen-checkpoint --config tiny-v41)
"""
import os, sys, json, numpy as np, torch
sys.path.insert(0, "tools/golden")
import hf_v41_reference as R
port, ckpt, out = sys.argv[1], sys.argv[2], sys.argv[3]
modeling, configuration = R.import_port(port)
R.patch_cache(modeling)
R.use_lowest_index_tie_break(modeling)
config = json.load(open(os.path.join(ckpt, "config.json")))
model = modeling.DeepseekV41ForCausalLM(R.make_config(configuration, config)).to(torch.float32)
model.load_state_dict(R.build_state_dict(R.read_checkpoint(ckpt, config["quantization_config"])), strict=False)
R.bind_token_map(modeling, model, ckpt)
model.eval()
cap = {}
fp8_calls = []
orig_fp8 = modeling._fake_quant_fp8_block
def rec_fp8(x, block_size=32):
    y = orig_fp8(x, block_size)
    fp8_calls.append((x.detach().float().clone(), y.detach().float().clone()))
    return y
modeling._fake_quant_fp8_block = rec_fp8
def hook(name):
    def f(mod, inp, outp):
        o = outp[0] if isinstance(outp, tuple) else outp
        cap[name] = o.detach().float()[0].numpy().copy()
        if name.startswith("attn"):
            cap[name + "_in"] = inp[0].detach().float()[0].numpy().copy() if len(inp) else None
    return f
for l in (1, 2, 3, 4):
    model.model.layers[l].attn.register_forward_hook(hook(f"attn{l}"))
    model.model.layers[l].ffn.register_forward_hook(hook(f"mlp{l}"))
ids = R.prompt_ids(33, 99, config["text_config"]["vocab_size"])
model.model.bind_tokenizer(None)
with torch.no_grad():
    model(input_ids=torch.tensor([ids]), use_cache=True)
os.makedirs(out, exist_ok=True)
for i, (x, y) in enumerate(fp8_calls[:6]):
    cap[f"fp8_in{i}"] = x.reshape(-1, x.shape[-1]).numpy()
    cap[f"fp8_out{i}"] = y.reshape(-1, y.shape[-1]).numpy()
np.savez(os.path.join(out, "p1_hf.npz"), **{k: v for k, v in cap.items() if v is not None})
print("saved", sorted(cap.keys()), {k: v.shape for k, v in cap.items() if v is not None})

#!/usr/bin/env bash
# Runs on the H200 machine (device tool): generates the tiny synthetic V4-Flash checkpoint with our
# generator, dumps a few tensors through our loader, and runs transformers' DeepseekV4ForCausalLM
# on it (tools/golden/hf_v4_reference.py). Results land in $OUT/golden; the transformers sources
# that produced them in $OUT/hf_src.tar.gz. Needs .carry/ from tools/device/pack.sh.
set -euo pipefail
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIN="$PWD/.carry/bin/deepinfer"
CK=/tmp/tiny-v4f-seed0
OURS=/tmp/ours
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
"$BIN" gen-checkpoint --config tiny-v4f --seed 0 --out "$CK"
mkdir -p "$OURS"
for name in $(python3 tools/golden/hf_v4_reference.py --list-compare); do
  "$BIN" dump-tensor --model "$CK" --tensor "$name" --rows 16 --out "$OURS/$name.npy"
done
PYTHONUNBUFFERED=1 python3 tools/golden/hf_v4_reference.py --ckpt "$CK" --ours "$OURS" --out "$OUT/golden"
TF=$(python3 -c 'import transformers, os; print(os.path.dirname(transformers.__file__))')
tar czf "$OUT/hf_src.tar.gz" -C "$TF" models/deepseek_v4 integrations/finegrained_fp8.py conversion_mapping.py \
  modeling_rope_utils.py 2>/dev/null || tar czf "$OUT/hf_src.tar.gz" -C "$TF" models/deepseek_v4

#!/usr/bin/env bash
# Runs on the H200 machine (device tool): generates the tiny synthetic V4.1-Flash checkpoint with our
# generator, dumps a few tensors through our loader, and runs transformers' main-branch V4.1 port on
# it (tools/golden/hf_v41_reference.py). Results land in $OUT/golden_v41.
#
# Needs, under the git-ignored .carry/ (run with carry: [".carry"]):
#   .carry/bin/deepinfer + .carry/lib  — from tools/device/pack.sh (as for the V4 golden)
#   .carry/hf_v41/{__init__.py, configuration_deepseek_v41.py, modeling_deepseek_v41.py}
#       — huggingface/transformers, src/transformers/models/deepseek_v41/, modeling and configuration
#         at 0a2080b43eb64e6d448186a4f3f0bc9c618f4797, __init__.py at 34890d8dd52aed77d8faefc1825c5f204cc59591
#         (model_v41_flash.md §12). Fetch them on the development machine, e.g.
#           git -C <transformers clone> show 0a2080b4:src/transformers/models/deepseek_v41/modeling_deepseek_v41.py
#         They are read at run time and never committed.
set -euo pipefail
bash tools/device/unpack.sh  # .carry/bins.tar.xz -> .carry/bin
export LD_LIBRARY_PATH="$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIN="$PWD/.carry/bin/deepinfer"
PORT="$PWD/.carry/hf_v41"
CK=/tmp/tiny-v41-seed0
OURS=/tmp/ours-v41
for f in __init__.py configuration_deepseek_v41.py modeling_deepseek_v41.py; do
  [ -f "$PORT/$f" ] || { echo "missing $PORT/$f (see the header of this script)"; exit 2; }
done
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
"$BIN" gen-checkpoint --config tiny-v41 --seed 0 --out "$CK"
mkdir -p "$OURS"
for name in $(python3 tools/golden/hf_v41_reference.py --list-compare); do
  "$BIN" dump-tensor --model "$CK" --tensor "$name" --rows 16 --out "$OURS/$name.npy"
done
PYTHONUNBUFFERED=1 python3 tools/golden/hf_v41_reference.py --port "$PORT" --ckpt "$CK" --ours "$OURS" --out "$OUT/golden_v41"

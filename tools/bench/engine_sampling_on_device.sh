#!/usr/bin/env bash
# The engine's sampling paths on the device machine (after tools/device/pack.sh build-cuda and the
# tokenizer as .carry/tokenizer.json.xz, .carry/ carried): GPU time of every sampling launch of a
# short batch-1 engine run per sampler (ncu: top-p 0.95, top-k 50, plain temperature; top-p at
# concurrency 8), then `deepinfer bench-engine` at concurrency 1 / 8 / 32 (1,024-token prompts,
# 256 output tokens) for greedy, temperature, top-p, top-k, penalties and logprobs. Results in
# $OUT/profiles.tgz and $OUT/engine.tgz (few files: the device tool returns a limited number).
# Usage: COMMIT=<sha> bash tools/bench/engine_sampling_on_device.sh   (NCU=0: no profiles)
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
bash tools/device/unpack.sh
python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.carry/tokenizer.json.xz'),open('.carry/tokenizer.json','wb'))"
export DEEPINFER_TOKENIZER=$PWD/.carry/tokenizer.json LD_LIBRARY_PATH=$PWD/.carry/lib
BIN=.carry/bin/deepinfer
if [ "${NCU:-1}" != 0 ]; then
  ncu=/usr/local/cuda/bin/ncu prof=$(mktemp -d)
  short=("$BIN" bench-engine --layers 4 --input-len 64 --output-len 24 --temperature 0.8)
  for cfg in "1 --top-p 0.95" "1 --top-k 50" "1" "8 --top-p 0.95"; do
    set -- $cfg
    c=$1; shift
    tag=c${c}$(echo "x$*" | tr -dc 'a-z0-9')
    timeout 70 "$ncu" --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
      --kernel-name regex:'sample|argmax|gumbel|filter|merge' "${short[@]}" --concurrency "$c" "$@" > "$prof/ncu_$tag.csv" 2>&1
    echo "== concurrency $c $*"; python3 tools/bench/ncu_summary.py "$prof/ncu_$tag.csv" --top 10 2>&1 | tail -6
  done
  tar -C "$prof" -czf "$OUT/profiles.tgz" .
fi
eng=$(mktemp -d)
for args in "--temperature 0" "--temperature 0.8" "--temperature 0.8 --top-p 0.95" "--temperature 0.8 --top-k 50" \
            "--temperature 0.8 --repetition-penalty 1.1 --frequency-penalty 0.3" "--temperature 0.8 --logprobs 5"; do
  tag=$(echo "x$args" | tr -dc 'a-z0-9')
  timeout 50 "$BIN" bench-engine --layers 4 --concurrency 1,8,32 --input-len 1024 --output-len 256 $args \
    --commit "${COMMIT:-unknown}" --out "$eng/engine_$tag.json" > "$eng/engine_$tag.log" 2>&1
  echo "== $args: $(python3 -c "import json;d=json.load(open('$eng/engine_$tag.json'));print([round(r['output_tokens_per_s']) for r in d['rows']])" 2>&1)"
done
tar -C "$eng" -czf "$OUT/engine.tgz" .

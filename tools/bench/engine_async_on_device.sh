#!/usr/bin/env bash
# What asynchronous scheduling gains where it was extended in session 35, on the device machine
# (after tools/device/pack.sh build-cuda and the tokenizer as .carry/tokenizer.json.xz, .carry/
# carried): `deepinfer bench-engine` against the synchronous loop (--no-async-scheduling), in
# A B A B order so the spread of one binary shows, for
#   chunks:    8,192-token prompts in 2,048-token steps (most steps hold a prompt chunk beside the
#              others' decodes), greedy, 128 output tokens;
#   penalties: 1,024-token prompts, 256 output tokens, temperature 0.8 with repetition 1.1 and
#              frequency 0.3 (the device counts the token the host has not seen yet);
#   grammar:   1,024-token prompts, up to 128 output tokens under a regex (each row's mask filled
#              on the host while the forward runs; needs the tokenizer's vocabulary).
# 4 layers, concurrency 1 / 8 / 32. The JSON files (with their commands and steps_ahead) in
# $OUT/engine_async.tgz; a summary line per run on stdout.
# Usage: COMMIT=<sha> bash tools/bench/engine_async_on_device.sh   (REPEAT=2: A/B pairs; CASES="grammar":
# only those cases)
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
bash tools/device/unpack.sh
export LD_LIBRARY_PATH=$PWD/.carry/lib
if [ -f .carry/tokenizer.json.xz ]; then
  python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.carry/tokenizer.json.xz'),open('.carry/tokenizer.json','wb'))"
  export DEEPINFER_TOKENIZER=$PWD/.carry/tokenizer.json
fi
BIN=.carry/bin/deepinfer
eng=$(mktemp -d)
case_args() {
  case "$1" in
    chunks) echo "--input-len 8192 --output-len 128 --max-num-batched-tokens 2048 --temperature 0" ;;
    penalties) echo "--input-len 1024 --output-len 256 --temperature 0.8 --repetition-penalty 1.1 --frequency-penalty 0.3" ;;
    grammar) echo "--input-len 1024 --output-len 128 --temperature 0.8" ;;
  esac
}
for what in ${CASES:-chunks penalties grammar}; do
  extra=()
  [ "$what" = grammar ] && extra=(--regex '[a-z ]{1,400}')
  for rep in $(seq 1 "${REPEAT:-2}"); do
    for mode in async sync; do
      flag=()
      [ "$mode" = sync ] && flag=(--no-async-scheduling)
      json="$eng/${what}_${mode}_$rep.json"
      # shellcheck disable=SC2046
      timeout 120 "$BIN" bench-engine --layers 4 --concurrency 1,8,32 $(case_args "$what") "${extra[@]}" "${flag[@]}" \
        --commit "${COMMIT:-unknown}" --out "$json" > "$eng/${what}_${mode}_$rep.log" 2>&1
      echo "== $what $mode $rep: $(python3 -c "
import json
d = json.load(open('$json'))
print([(r.get('concurrency'), round(r['output_tokens_per_s']), r.get('steps_ahead')) for r in d['rows']])" 2>&1)"
    done
  done
done
tar -C "$eng" -czf "$OUT/engine_async.tgz" .

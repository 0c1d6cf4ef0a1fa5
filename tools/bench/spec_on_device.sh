#!/usr/bin/env bash
# What speculative decoding's mechanism costs on the device machine (after tools/device/pack.sh
# build-cuda, .carry/ carried): `deepinfer bench-engine` on the synthetic 4-layer model (V4-Flash
# widths, random weights, its MTP block included with --nextn-decode) without drafts and with k MTP
# drafts per step, in A B A B order. Random weights make the drafts all but never accepted, so what
# this measures is the price of a step that verifies k drafts it then gives up — the MTP pass over
# the step's rows, its k - 1 chained steps, the k + 1 sampled rows per sequence, the verify step's
# extra rows — not the gain a real checkpoint's MTP brings (its acceptance is the checkpoint's).
# JSON per run (with its command) in $OUT/spec.tgz, a summary line per run on stdout.
# Usage: COMMIT=<sha> K=3 bash tools/bench/spec_on_device.sh   (REPEAT=2: A/B pairs)
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder (the device tool sets it)}"
bash tools/device/unpack.sh
export LD_LIBRARY_PATH=$PWD/.carry/lib
# bench-engine builds an engine, and an engine needs a tokenizer (pack.sh leaves it as
# .carry/tokenizer.json.xz; session 40's first run of this script failed for want of it).
if [ -f .carry/tokenizer.json.xz ]; then
  python3 -c "import lzma,shutil;shutil.copyfileobj(lzma.open('.carry/tokenizer.json.xz'),open('.carry/tokenizer.json','wb'))"
  export DEEPINFER_TOKENIZER=$PWD/.carry/tokenizer.json
fi
BIN=.carry/bin/deepinfer
dir=$(mktemp -d)
for rep in $(seq 1 "${REPEAT:-2}"); do
  for mode in plain "nextn${K:-3}"; do
    flag=()
    [ "$mode" != plain ] && flag=(--nextn-decode "${K:-3}")
    json="$dir/${mode}_$rep.json"
    timeout 150 "$BIN" bench-engine --layers 4 --concurrency "${CONCURRENCY:-1,8,32}" --input-len 1024 \
      --output-len 128 --temperature "${TEMPERATURE:-0}" "${flag[@]}" --commit "${COMMIT:-unknown}" --out "$json" \
      > "$dir/${mode}_$rep.log" 2>&1 || echo "$mode $rep failed: $(tail -3 "$dir/${mode}_$rep.log")"
    echo "== $mode $rep: $(python3 -c "
import json
d = json.load(open('$json'))
print([(r.get('concurrency'), round(r['output_tokens_per_s']), r.get('draft_rows'), r.get('draft_tokens'),
        r.get('accepted_draft_tokens')) for r in d['rows']])" 2>&1)"
  done
done
tar -C "$dir" -czf "$OUT/spec.tgz" .

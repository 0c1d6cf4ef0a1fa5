#!/usr/bin/env bash
# Builds the safetensors header fuzz target with clang's libFuzzer + ASan/UBSan and fuzzes it for a
# short, fixed time from a small seed corpus (valid headers and classic breakages). Used by CI
# (ctest safetensors_header_fuzz); exit 0 = no crash. Skips (77) without clang or libFuzzer.
# Usage: run_fuzz.sh <source dir> <work dir> [seconds]
set -euo pipefail
src=$1
work=$2
seconds=${3:-20}
cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "clang++ not found (Debian: clang, libclang-rt-14-dev)"; exit 77; }
mkdir -p "$work/corpus"
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/src" -I"$src/include" \
  "$src/tests/fuzz/safetensors_header_fuzz.cc" "$src/src/loader/safetensors.cc" \
  "$src/src/base/status.cc" "$src/src/base/file.cc" "$src/src/base/log.cc" \
  "$src/src/tensor/dtype.cc" -lfmt -o "$work/safetensors_header_fuzz"

# Seeds: an 8-byte little-endian header length, then the JSON header (and a data section).
seed() {  # name json data_bytes
  python3 - "$work/corpus/$1" "$2" "$3" <<'PY'
import struct, sys
path, js, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
open(path, "wb").write(struct.pack("<Q", len(js)) + js + b"\0" * n)
PY
}
seed valid '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{"format":"pt"}}' 16
seed fp8 '{"w":{"dtype":"F8_E4M3","shape":[4,4],"data_offsets":[0,16]},"s":{"dtype":"F8_E8M0","shape":[1,1],"data_offsets":[16,17]}}' 17
seed overlap '{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"I8","shape":[8],"data_offsets":[4,12]}}' 12
seed badshape '{"a":{"dtype":"F32","shape":[-1,9223372036854775807],"data_offsets":[0,4]}}' 4
seed dtype '{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}' 1
seed trunc '{"a":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}}' 3
"$work/safetensors_header_fuzz" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
  "$work/corpus" 2>&1 | tail -15

#!/usr/bin/env bash
# Packs what a device run needs into .carry/ (git-ignored): the deepinfer binary built here and
# the shared libraries it uses that the device image lacks (libfmt, libpcre2-8, libgomp, libxxhash,
# libpng16, libjpeg62; libcupti for
# `bench --timeline`); the binaries as .carry/bins.tar.xz (tools/device/unpack.sh restores them on
# the device).
# The device machine runs Ubuntu 24.04 (newer glibc/libstdc++), so binaries built here run there.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
rm -rf .carry && mkdir -p .carry/bin .carry/lib
cp "$BUILD/bin/deepinfer" .carry/bin/
# CUDA test binaries, when this build has the CUDA backend.
for f in "$BUILD"/tests/ops/cuda_ops_test "$BUILD"/tests/model/cuda_model_test; do
  [ -x "$f" ] && cp "$f" .carry/bin/
done
# libpng16 and libjpeg62 for the V4.1 vision stage (Ubuntu 24.04 ships libjpeg.so.8, not .62).
for lib in libfmt.so.9 libpcre2-8.so.0 libgomp.so.1 libxxhash.so.0 libpng16.so.16 libjpeg.so.62; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .carry/lib/ 2>/dev/null || cp -L "/lib/x86_64-linux-gnu/$lib" .carry/lib/
done
# CUPTI for `deepinfer bench --timeline` (loaded at run time; the toolkit's, matching the headers
# the binary was built with), compressed with the binaries below.
CUPTI_LIB="${CUPTI_LIB:-/usr/local/cuda/lib64/libcupti.so.13}"
[ -f "$CUPTI_LIB" ] && cp -L "$CUPTI_LIB" .carry/bin/
# transformers' V4.1 port for the V4.1 golden run (read at run time, never committed): see
# tools/golden/run_v41_golden_on_device.sh. HF_V41_PORT names a folder holding the three files.
if [ -n "${HF_V41_PORT:-}" ]; then
  mkdir -p .carry/hf_v41
  cp "$HF_V41_PORT"/__init__.py "$HF_V41_PORT"/configuration_deepseek_v41.py "$HF_V41_PORT"/modeling_deepseek_v41.py .carry/hf_v41/
fi
# The device tool carries at most 64 MiB with the working tree: the binaries travel compressed
# and tools/device/unpack.sh (run first by every device script) restores .carry/bin. The three
# binaries share most of their ~25 MB of device code, which only a dictionary larger than one of
# them finds: xz -9 (64 MiB dictionary) packs them into ~18 MB where -3 (4 MiB) left ~48 MB, too
# much beside a ~17 MB tree (session 34: a refused carry). ~2 minutes on two cores.
tar -C .carry -cf - bin | xz -T0 -9 > .carry/bins.tar.xz
rm -rf .carry/bin
du -sh .carry

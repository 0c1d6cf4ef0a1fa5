#!/usr/bin/env bash
# Packs what a device run needs into .carry/ (git-ignored): the deepinfer binary built here and
# the shared libraries it uses that the device image lacks (libfmt, libpcre2-8, libgomp).
# The device machine runs Ubuntu 24.04 (newer glibc/libstdc++), so binaries built here run there.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
rm -rf .carry && mkdir -p .carry/bin .carry/lib
cp "$BUILD/bin/deepinfer" .carry/bin/
for f in "$BUILD"/bin/*; do [ -f "$f" ] && [ -x "$f" ] && cp "$f" .carry/bin/; done
for lib in libfmt.so.9 libpcre2-8.so.0 libgomp.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .carry/lib/ 2>/dev/null || cp -L "/lib/x86_64-linux-gnu/$lib" .carry/lib/
done
du -sh .carry

#!/usr/bin/env bash
# On the device machine: restores .carry/bin from the compressed .carry/bins.tar.xz that
# tools/device/pack.sh writes (Python's lzma: the device image may lack the xz tool). Every
# device script runs it first; a no-op when the binaries are already there.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -f .carry/bins.tar.xz ] && [ ! -x .carry/bin/deepinfer ]; then
  python3 -c "import tarfile; tarfile.open('.carry/bins.tar.xz').extractall('.carry')"
fi
# CUPTI travels with the binaries (pack.sh) but is loaded through LD_LIBRARY_PATH=.carry/lib.
if [ -f .carry/bin/libcupti.so.13 ]; then mv .carry/bin/libcupti.so.13 .carry/lib/; fi

#!/usr/bin/env bash
# Builds `deepinfer` at another commit or branch in this checkout's CUDA build and packs it as
# .carry/deepinfer_<name>.xz, for an A/B of two builds in one device call:
#   CONFIGS='-|bin=.carry/deepinfer_<name>.xz|-|bin=.carry/deepinfer_<name>.xz' ... tools/bench/ab_on_device.sh
# Run it after tools/device/pack.sh (which recreates .carry/). The work tree must be clean: it
# switches to the variant (detached; git rewrites only the files that differ, so ninja rebuilds
# only what they touch), builds, and switches back — the next build of the original rebuilds
# those files again. Mind the device tool's 64 MiB carry: one binary adds ~16 MB.
# Usage: bash tools/device/build_variant.sh fqn-on-main fqn [build-cuda]
set -euo pipefail
cd "$(dirname "$0")/../.."
VARIANT="${1:?commit or branch to build}"
NAME="${2:?name: .carry/deepinfer_<name>.xz}"
BUILD="${3:-build-cuda}"
[ -d .carry ] || { echo "no .carry/: run tools/device/pack.sh first" >&2; exit 1; }
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "the work tree has changes: commit or stash them" >&2; exit 1; }
orig="$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)"
git checkout -q --detach "$VARIANT"
trap 'git checkout -q "$orig"' EXIT
ninja -C "$BUILD" deepinfer
xz -T0 -6 -c "$BUILD/bin/deepinfer" > ".carry/deepinfer_$NAME.xz"
echo "$(git rev-parse HEAD) $VARIANT" > ".carry/deepinfer_$NAME.commit"
echo ".carry/deepinfer_$NAME.xz: $(du -h ".carry/deepinfer_$NAME.xz" | cut -f1) (built at $VARIANT)"

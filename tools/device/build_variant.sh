#!/usr/bin/env bash
# Builds `deepinfer` at another commit or branch in this checkout's CUDA build and adds it to
# .carry/bins.tar.xz as bin/deepinfer_<name>, for an A/B of several builds in one device call:
#   CONFIGS='-|bin=.carry/bin/deepinfer_<name>|-|bin=.carry/bin/deepinfer_<name>' ... tools/bench/ab_on_device.sh
# Run it after tools/device/pack.sh (which recreates .carry/). The work tree must be clean: it
# switches to the variant (detached; git rewrites only the files that differ, so ninja rebuilds
# only what they touch), builds, and switches back — the next build of the original rebuilds
# those files again. The archive is re-packed solid with a dictionary larger than all of its
# binaries together, so a variant (which shares nearly all of its ~30 MB with deepinfer) adds well
# under 1 MB to the device tool's 64 MiB carry; each as a file of its own added ~16 MB, and two
# variants beside the tree and the archive were refused (session 49). ~1 minute per re-pack.
# A throwaway variant for timing only (a kernel with a step left out, say) is a commit on a side
# branch built this way; delete the branch after the run.
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
tmp="$(mktemp -d)"
trap 'git checkout -q "$orig"; rm -rf "$tmp"' EXIT
python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" .carry/bins.tar.xz "$tmp"
cp "$BUILD/bin/deepinfer" "$tmp/bin/deepinfer_$NAME"
echo "$(git rev-parse HEAD) $VARIANT" > ".carry/deepinfer_$NAME.commit"
# deepinfer and its variants adjacent (ls sorts them so): the matches xz finds lie within the dictionary.
(cd "$tmp" && ls bin | sed 's|^|bin/|' > list && tar -cf - -T list) |
  xz -T1 --lzma2=preset=6,dict=192MiB > .carry/bins.tar.xz.new
mv .carry/bins.tar.xz.new .carry/bins.tar.xz
echo ".carry/bins.tar.xz: $(du -h .carry/bins.tar.xz | cut -f1), with bin/deepinfer_$NAME (built at $VARIANT)"

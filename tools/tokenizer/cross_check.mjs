// Cross-check of DeepInfer's tokenizer against the npm JavaScript tokenizer on the generated
// corpus (gen_corpus.mjs), special-token matching off on both sides. Requires ZERO differing
// lines; also requires `deepinfer detokenize` to turn the ids back into every original line.
// Usage: node tools/tokenizer/cross_check.mjs --cli <deepinfer> --tokenizer <tokenizer.json>
//          [--work-dir DIR] [--lines N]
// Exit status 0 only when everything matches; the first differences are printed in full.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generate_corpus } from "./gen_corpus.mjs";
import { js_encode, load_js_tokenizer } from "./js_tokenize.mjs";

function parse_args(argv) {
  const args = { lines: 12000, work_dir: "." };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "").replaceAll("-", "_");
    args[key] = argv[i + 1];
  }
  if (!args.cli || !args.tokenizer) throw new Error("need --cli <deepinfer> and --tokenizer <tokenizer.json>");
  return args;
}

function run_cli(cli, argv, input) {
  const r = spawnSync(cli, argv, { input, maxBuffer: 1 << 30, encoding: "utf8" });
  if (r.error) throw new Error(`cannot run ${cli}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cli} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout.split("\n").filter((l) => l.length > 0);
}

function first_difference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
}

function main() {
  const args = parse_args(process.argv.slice(2));
  mkdirSync(args.work_dir, { recursive: true });
  const lines = generate_corpus(Number(args.lines));
  const corpus = lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
  writeFileSync(join(args.work_dir, "tokenizer_corpus.jsonl"), corpus);

  const t0 = Date.now();
  const tokenizer = load_js_tokenizer();
  const js_ids = lines.map((l) => js_encode(tokenizer, l));
  const t1 = Date.now();
  const cpp_ids = run_cli(args.cli, ["tokenize", "--jsonl", "--tokenizer", args.tokenizer], corpus)
    .map((l) => JSON.parse(l));
  const t2 = Date.now();
  if (cpp_ids.length !== lines.length) {
    throw new Error(`deepinfer tokenize printed ${cpp_ids.length} lines for ${lines.length} inputs`);
  }

  let n_mismatch = 0;
  let n_tokens = 0;
  for (let i = 0; i < lines.length; ++i) {
    n_tokens += js_ids[i].length;
    const a = js_ids[i];
    const b = cpp_ids[i];
    if (a.length === b.length && a.every((v, k) => v === b[k])) continue;
    if (++n_mismatch <= 10) {
      const k = first_difference(a, b);
      console.log(`MISMATCH line ${i + 1}: ${JSON.stringify(lines[i]).slice(0, 300)}`);
      console.log(`  first difference at token ${k}`);
      console.log(`  js : ${JSON.stringify(a.slice(Math.max(0, k - 3), k + 8))}`);
      console.log(`  cpp: ${JSON.stringify(b.slice(Math.max(0, k - 3), k + 8))}`);
    }
  }

  const decoded = run_cli(args.cli, ["detokenize", "--jsonl", "--tokenizer", args.tokenizer],
                          js_ids.map((ids) => JSON.stringify(ids)).join("\n") + "\n")
    .map((l) => JSON.parse(l));
  let n_roundtrip_fail = 0;
  for (let i = 0; i < lines.length; ++i) {
    if (decoded[i] === lines[i]) continue;
    if (++n_roundtrip_fail <= 5) console.log(`ROUND-TRIP line ${i + 1}: ${JSON.stringify(decoded[i]).slice(0, 200)}`);
  }

  const bytes = lines.reduce((s, l) => s + Buffer.byteLength(l, "utf8"), 0);
  const report = {
    lines: lines.length, bytes, tokens: n_tokens, mismatched_lines: n_mismatch,
    roundtrip_failures: n_roundtrip_fail, js_ms: t1 - t0, cpp_cli_ms: t2 - t1,
  };
  writeFileSync(join(args.work_dir, "tokenizer_cross_check.json"), JSON.stringify(report, null, 2) + "\n");
  console.log(`${lines.length} lines, ${bytes} bytes, ${n_tokens} tokens: ${n_mismatch} mismatched lines, ` +
              `${n_roundtrip_fail} round-trip failures (js ${t1 - t0} ms, deepinfer cli ${t2 - t1} ms)`);
  process.exit(n_mismatch === 0 && n_roundtrip_fail === 0 ? 0 : 1);
}

try {
  main();
} catch (e) {
  console.error(`cross_check: ${e.message}`);
  process.exit(2);
}

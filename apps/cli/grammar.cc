// `deepinfer grammar check|bench`: structured-output grammars from the command line.
//   check: compile (--json-schema FILE | --regex EXPR | --ebnf FILE | --dsml TOOLS.json), tokenize
//          stdin, drive the token matcher; exit 0 = accepted as a complete output, 1 = rejected
//          (token index and byte offset printed), 2 = the grammar does not compile (keyword or
//          construct printed).
//   bench: same inputs; compile time and per-token fill_bitmask latency (cold, then warm) over
//          the tokens of stdin.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.h"
#include "deepinfer/grammar.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "grammar";

struct GrammarOptions {
  std::string json_schema, regex, ebnf, dsml, tokenizer_path;
  bool any_order = false, flexible = false, python_separators = false, special = false, thinking = false;
  bool verify_masks = false;
  int32_t vocab_size = 0;
  int repeat = 3;
};

std::string read_file_or_fail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kName, "cannot read " + path, 2);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<DsmlToolSpec> parse_tools(const std::string& path) {
  const auto tools = nlohmann::json::parse(read_file_or_fail(path), nullptr, false);
  if (!tools.is_array()) fail(kName, path + ": expected a JSON array of tools", 2);
  std::vector<DsmlToolSpec> out;
  for (const auto& t : tools) {
    const auto& f = t.contains("function") ? t["function"] : t;  // OpenAI {"type":"function",...} or bare
    if (!f.contains("name") || !f["name"].is_string()) fail(kName, path + ": a tool without a name", 2);
    out.push_back({f["name"].get<std::string>(), f.contains("parameters") ? f["parameters"].dump() : "{}"});
  }
  return out;
}

std::shared_ptr<const Grammar> compile(const GrammarCompiler& c, const GrammarOptions& o) {
  const int sources = !o.json_schema.empty() + !o.regex.empty() + !o.ebnf.empty() + !o.dsml.empty();
  if (sources != 1) fail(kName, "give exactly one of --json-schema, --regex, --ebnf, --dsml", 2);
  Result<std::shared_ptr<const Grammar>> g = Status(StatusCode::kInternal, "no grammar");
  if (!o.json_schema.empty()) {
    JsonSchemaGrammarOptions js;
    js.any_order = o.any_order;
    js.flexible_whitespace = o.flexible;
    if (o.python_separators) { js.item_separator = ", "; js.key_separator = ": "; }
    g = c.compile_json_schema(read_file_or_fail(o.json_schema), js);
  } else if (!o.regex.empty()) {
    g = c.compile_regex(o.regex);
  } else if (!o.ebnf.empty()) {
    g = c.compile_ebnf(read_file_or_fail(o.ebnf));
  } else {
    DsmlGrammarOptions ds;
    ds.thinking = o.thinking;
    g = c.compile_dsml(parse_tools(o.dsml), ds);
  }
  if (!g.is_ok()) fail(kName, "grammar does not compile: " + g.status().message(), 2);
  return *g;
}

struct Loaded {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const GrammarCompiler> compiler;
  std::vector<int32_t> tokens;
};

Loaded load(const GrammarOptions& o) {
  Loaded l;
  auto tok = o.tokenizer_path.empty() ? Tokenizer::load_default() : Tokenizer::load(o.tokenizer_path);
  if (!tok.is_ok()) fail(kName, tok.status().message(), 2);
  l.tokenizer = *tok;
  auto c = GrammarCompiler::create(l.tokenizer, o.vocab_size);
  if (!c.is_ok()) fail(kName, c.status().message(), 2);
  l.compiler = *c;
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  l.tokens = l.tokenizer->encode(text, o.special || !o.dsml.empty());
  return l;
}

void run_check(const GrammarOptions& o) {
  const Loaded l = load(o);
  const auto grammar = compile(*l.compiler, o);
  GrammarMatcher m(grammar);
  std::vector<uint32_t> mask(static_cast<size_t>(m.bitmask_words()));
  size_t offset = 0;
  for (size_t i = 0; i < l.tokens.size(); ++i) {
    const int32_t t = l.tokens[i];
    bool in_mask = true;
    if (o.verify_masks) {
      if (!m.fill_bitmask(mask).is_ok()) fail(kName, "bitmask fill failed", 3);
      in_mask = (mask[t >> 5] >> (t & 31)) & 1u;
    }
    const bool ok = m.accept(t);
    if (o.verify_masks && ok != in_mask) fail(kName, "internal: mask and accept disagree at token " + std::to_string(i), 3);
    if (!ok) {
      std::printf("rejected: token %zu (id %d, %s) at byte offset %zu\n", i, t,
                  nlohmann::json(l.tokenizer->token_bytes(t)).dump(-1, ' ', false,
                                                                 nlohmann::json::error_handler_t::replace).c_str(),
                  offset);
      throw CLI::RuntimeError(1);
    }
    offset += l.tokenizer->token_bytes(t).size();
  }
  if (!m.can_terminate()) {
    std::printf("rejected: the output is incomplete (the grammar expects more after byte %zu, token %zu)\n",
                offset, l.tokens.size());
    throw CLI::RuntimeError(1);
  }
  std::printf("accepted: %zu tokens, %zu bytes\n", l.tokens.size(), offset);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void run_bench(const GrammarOptions& o) {
  using Clock = std::chrono::steady_clock;
  const Loaded l = load(o);
  const auto t0 = Clock::now();
  const auto grammar = compile(*l.compiler, o);
  const double compile_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  std::printf("compile: %.1f us, %d automaton states, %zu tokens of input\n", compile_us,
              grammar->n_automaton_states(), l.tokens.size());
  std::vector<uint32_t> mask;
  for (int rep = 0; rep < std::max(1, o.repeat); ++rep) {
    GrammarMatcher m(grammar);
    mask.assign(static_cast<size_t>(m.bitmask_words()), 0);
    std::vector<double> us;
    for (int32_t t : l.tokens) {
      const auto a = Clock::now();
      if (!m.fill_bitmask(mask).is_ok()) fail(kName, "bitmask fill failed", 3);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
      if (!m.accept(t)) fail(kName, "the input is rejected by the grammar", 1);
    }
    std::printf("%s: mask p50 %.1f us, p99 %.1f us, max %.1f us\n", rep == 0 ? "cold" : "warm",
                percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0));
  }
}

void add_source_options(CLI::App* app, const std::shared_ptr<GrammarOptions>& o) {
  app->add_option("--json-schema", o->json_schema, "JSON schema file");
  app->add_option("--regex", o->regex, "regular expression the whole output must match");
  app->add_option("--ebnf", o->ebnf, "GBNF or Lark-style grammar file");
  app->add_option("--dsml", o->dsml, "tools JSON (OpenAI tools array) for a DSML tool-call grammar");
  app->add_option("--tokenizer", o->tokenizer_path,
                  "tokenizer.json (default: $DEEPINFER_TOKENIZER, else the prepared DeepSeek-V4 one)");
  app->add_option("--vocab-size", o->vocab_size, "bitmask width in tokens (default: the tokenizer's)");
  app->add_flag("--any-order", o->any_order, "JSON schema: properties in any order");
  app->add_flag("--flexible-whitespace", o->flexible, "JSON schema: allow whitespace between tokens");
  app->add_flag("--python-separators", o->python_separators, "JSON schema: \", \" and \": \" separators");
  app->add_flag("--special", o->special, "tokenize text such as <think> as special tokens (always on with --dsml)");
  app->add_flag("--thinking", o->thinking, "DSML: output starts with reasoning closed by </think>");
}

void setup(CLI::App* app) {
  app->require_subcommand(1);
  auto opt = std::make_shared<GrammarOptions>();
  CLI::App* check = app->add_subcommand("check", "check stdin against a grammar (exit 0 accepted, 1 rejected, 2 bad grammar)");
  add_source_options(check, opt);
  check->add_flag("--verify-masks", opt->verify_masks, "also check each token against the filled bitmask");
  check->callback([opt] { run_check(*opt); });
  CLI::App* bench = app->add_subcommand("bench", "time grammar compilation and per-token bitmask fills over stdin");
  add_source_options(bench, opt);
  bench->add_option("--repeat", opt->repeat, "passes over the input (the first is cold)");
  bench->callback([opt] { run_bench(*opt); });
}

}  // namespace

DI_CLI_COMMAND(kName, "structured outputs: check text against a regex / EBNF / JSON schema / DSML grammar", setup);

}  // namespace deepinfer::cli

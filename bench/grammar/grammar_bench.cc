// grammar_bench: per-token bitmask latency and compile time over generated realistic JSON schemas
// (schema_gen.h) with the DeepSeek tokenizer at the model's 129,280-token width, single thread.
// Each schema is compiled fresh and its instance (compact JSON) is forced token by token: per
// token we time fill_bitmask (mask) and fill_bitmask + accept (mask + commit), like MaskBench.
// Also checks that every instance token is allowed by its mask and the instance is accepted.
// With --regex R --text T it times one regex instead (--ebnf G: one grammar): compiled once, T
// forced token by token (--repeat times, a fresh matcher each), the per-token figures as above.
//   grammar_bench [--schemas N] [--seed S] [--tokenizer PATH] [--vocab-size V] [--flexible]
//                 [--any-order] [--regex R | --ebnf G] [--text T [--repeat N]] [--out results.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "deepinfer/grammar.h"
#include "deepinfer/tokenizer.h"
#include "schema_gen.h"

using deepinfer::bench::OJson;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  int schemas = 300;
  uint64_t seed = 20240601;
  std::string tokenizer, out;
  int32_t vocab_size = 129280;
  bool flexible = false, any_order = false;
  std::string regex, ebnf, text;
  int repeat = 1;
};

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

// Thread CPU time: on a loaded machine wall time also counts time the thread was not running.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

OJson summary(std::vector<double> v) {
  return OJson{{"n", v.size()}, {"p50_us", pct(v, 0.5)}, {"p90_us", pct(v, 0.9)}, {"p99_us", pct(v, 0.99)},
               {"p99_9_us", pct(v, 0.999)}, {"max_us", pct(v, 1.0)}};
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--schemas") a.schemas = std::stoi(next());
    else if (k == "--seed") a.seed = std::stoull(next());
    else if (k == "--tokenizer") a.tokenizer = next();
    else if (k == "--vocab-size") a.vocab_size = std::stoi(next());
    else if (k == "--out") a.out = next();
    else if (k == "--flexible") a.flexible = true;
    else if (k == "--any-order") a.any_order = true;
    else if (k == "--regex") a.regex = next();
    else if (k == "--ebnf") a.ebnf = next();
    else if (k == "--text") a.text = next();
    else if (k == "--repeat") a.repeat = std::stoi(next());
    else { std::fprintf(stderr, "unknown argument %s\n", k.c_str()); std::exit(2); }
  }
  return a;
}

// Per-token timings of forcing a token sequence through a matcher.
struct Timings {
  std::vector<double> mask_us, mask_commit_us, mask_cpu_us;
};

// Forces `ids` through `m` (mask, check, accept per token); false at the first token the mask
// or the matcher refuses.
bool force(deepinfer::GrammarMatcher& m, const std::vector<int32_t>& ids, std::vector<uint32_t>& mask, Timings& t) {
  mask.assign(static_cast<size_t>(m.bitmask_words()), 0);
  for (int32_t id : ids) {
    const auto t0 = Clock::now();
    const double c0 = cpu_us();
    (void)m.fill_bitmask(mask);
    const double fill = us_since(t0);
    t.mask_cpu_us.push_back(cpu_us() - c0);
    const bool allowed = (mask[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u;
    const bool accepted = m.accept(id);
    t.mask_commit_us.push_back(us_since(t0));
    t.mask_us.push_back(fill);
    if (!allowed || !accepted) return false;
  }
  return true;
}

// --regex / --ebnf mode: one pattern or grammar, its instance forced --repeat times.
int run_regex(const Args& args, const deepinfer::Tokenizer& tok, const deepinfer::GrammarCompiler& compiler,
              double vocab_ms) {
  auto t = Clock::now();
  auto grammar = args.ebnf.empty() ? compiler.compile_regex(args.regex) : compiler.compile_ebnf(args.ebnf);
  const double compile_us = us_since(t);
  if (!grammar.is_ok()) { std::fprintf(stderr, "%s\n", grammar.status().to_string().c_str()); return 2; }
  const std::vector<int32_t> ids = tok.encode(args.text, false);
  Timings tm;
  std::vector<uint32_t> mask;
  bool ok = true;
  for (int r = 0; r < args.repeat && ok; ++r) {
    deepinfer::GrammarMatcher m(*grammar);
    ok = force(m, ids, mask, tm);
  }
  OJson result{{"benchmark", args.ebnf.empty() ? "grammar mask latency, one regex" : "grammar mask latency, one EBNF grammar"},
               {"regex", args.regex},
               {"ebnf", args.ebnf},
               {"text_bytes", args.text.size()},
               {"tokens_per_pass", ids.size()},
               {"repeat", args.repeat},
               {"vocab_size", args.vocab_size},
               {"vocabulary_index_ms", vocab_ms},
               {"compile_us", compile_us},
               {"instance_rejected", !ok},
               {"mask", summary(tm.mask_us)},
               {"mask_thread_cpu", summary(tm.mask_cpu_us)},
               {"mask_plus_commit", summary(tm.mask_commit_us)}};
  std::printf("%s\n", result.dump(2).c_str());
  if (!args.out.empty()) std::ofstream(args.out) << result.dump(2) << "\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  auto tok = args.tokenizer.empty() ? deepinfer::Tokenizer::load_default() : deepinfer::Tokenizer::load(args.tokenizer);
  if (!tok.is_ok()) { std::fprintf(stderr, "%s\n", tok.status().to_string().c_str()); return 2; }
  const auto t_vocab = Clock::now();
  auto compiler = deepinfer::GrammarCompiler::create(*tok, args.vocab_size);
  if (!compiler.is_ok()) { std::fprintf(stderr, "%s\n", compiler.status().to_string().c_str()); return 2; }
  const double vocab_ms = us_since(t_vocab) / 1000;
  if (!args.regex.empty() || !args.ebnf.empty()) return run_regex(args, **tok, **compiler, vocab_ms);
  deepinfer::JsonSchemaGrammarOptions opts;
  opts.flexible_whitespace = args.flexible;
  opts.any_order = args.any_order;
  deepinfer::bench::SchemaGenerator gen(args.seed);
  std::vector<double> compile_us, compile_cpu_us;
  Timings tm;
  int failures = 0, rejected = 0;
  size_t n_tokens = 0;
  std::vector<uint32_t> mask;
  for (int i = 0; i < args.schemas; ++i) {
    const auto c = gen.next();
    const std::string schema = c.schema.dump();
    const std::string text = c.instance.dump();
    auto t = Clock::now();
    double c0 = cpu_us();
    auto grammar = (*compiler)->compile_json_schema(schema, opts);
    compile_us.push_back(us_since(t));
    compile_cpu_us.push_back(cpu_us() - c0);
    if (!grammar.is_ok()) {
      ++failures;
      std::fprintf(stderr, "schema %d: %s\n", i, grammar.status().to_string().c_str());
      continue;
    }
    deepinfer::GrammarMatcher m(*grammar);
    const std::vector<int32_t> ids = (*tok)->encode(text, false);
    const bool ok = force(m, ids, mask, tm);
    n_tokens += ids.size();
    if (!ok || !m.can_terminate()) {
      ++rejected;
      std::fprintf(stderr, "schema %d: instance rejected: %s\nschema: %s\n", i, text.c_str(), schema.c_str());
    }
  }
  OJson result{{"benchmark", "grammar mask latency, generated JSON schemas (bench/grammar/schema_gen.cc)"},
               {"schemas", args.schemas},
               {"seed", args.seed},
               {"vocab_size", args.vocab_size},
               {"whitespace", args.flexible ? "flexible" : "compact"},
               {"property_order", args.any_order ? "any" : "schema"},
               {"vocabulary_index_ms", vocab_ms},
               {"compile_failures", failures},
               {"instances_rejected", rejected},
               {"tokens", n_tokens},
               {"compile", summary(compile_us)},
               {"compile_thread_cpu", summary(compile_cpu_us)},
               {"mask", summary(tm.mask_us)},
               {"mask_thread_cpu", summary(tm.mask_cpu_us)},
               {"mask_plus_commit", summary(tm.mask_commit_us)}};
  std::printf("%s\n", result.dump(2).c_str());
  if (!args.out.empty()) std::ofstream(args.out) << result.dump(2) << "\n";
  return failures == 0 && rejected == 0 ? 0 : 1;
}

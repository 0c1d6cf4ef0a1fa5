// Encode throughput of the BPE tokenizer on one core, plain std::chrono (no framework needed).
// Usage: tokenizer_bench --corpus corpus.jsonl [--tokenizer tokenizer.json] [--seconds 3]
// The corpus is JSONL (one JSON string per line, as tools/tokenizer/gen_corpus.mjs writes).
// Reports, as one JSON object on stdout: the first pass over the corpus with a fresh tokenizer
// (cold piece cache), then the median of repeated passes (warm cache), each encoding line by
// line with special-token matching off; plus the whole corpus encoded as one text. Throughput is
// computed from this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which stays meaningful on a
// shared, loaded machine; wall-clock MB/s is reported next to it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double cpu_s = 0;
  double wall_s = 0;
};

// One pass over all lines. `sink` keeps the work from being optimised away.
Timing encode_pass(const deepinfer::Tokenizer& tok, const std::vector<std::string>& lines,
                   size_t* sink) {
  const auto wall0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  for (const auto& line : lines) *sink += tok.encode(line, false).size();
  return {thread_cpu_seconds() - cpu0, seconds_since(wall0)};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int fail(const std::string& message) {
  std::fprintf(stderr, "tokenizer_bench: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus_path, tokenizer_path;
  double min_seconds = 3.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--corpus")
      corpus_path = argv[i + 1];
    else if (key == "--tokenizer")
      tokenizer_path = argv[i + 1];
    else if (key == "--seconds")
      min_seconds = std::stod(argv[i + 1]);
    else
      return fail("unknown option " + key);
  }
  if (corpus_path.empty())
    return fail("usage: tokenizer_bench --corpus corpus.jsonl [--tokenizer PATH] [--seconds S]");

  std::ifstream in(corpus_path);
  if (!in) return fail("cannot open " + corpus_path);
  std::vector<std::string> lines;
  size_t n_bytes = 0;
  for (std::string line; std::getline(in, line);) {
    try {
      lines.push_back(nlohmann::json::parse(line).get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      return fail(corpus_path + " line " + std::to_string(lines.size() + 1) + ": " + e.what());
    }
    n_bytes += lines.back().size();
  }

  const auto t_load = Clock::now();
  auto tok = tokenizer_path.empty() ? deepinfer::Tokenizer::load_default()
                                    : deepinfer::Tokenizer::load(tokenizer_path);
  if (!tok.is_ok()) return fail(tok.status().message());
  const double load_s = seconds_since(t_load);

  size_t sink = 0;
  const double mb = static_cast<double>(n_bytes) / 1e6;
  const Timing cold = encode_pass(**tok, lines, &sink);
  std::vector<double> warm_cpu, warm_wall;
  const auto t_warm = Clock::now();
  while (warm_cpu.size() < 3 || seconds_since(t_warm) < min_seconds) {
    const Timing t = encode_pass(**tok, lines, &sink);
    warm_cpu.push_back(t.cpu_s);
    warm_wall.push_back(t.wall_s);
  }

  std::string whole;
  for (const auto& line : lines) (whole += line) += '\n';
  const double cpu_whole0 = thread_cpu_seconds();
  const size_t n_tokens_whole = (*tok)->encode(whole, false).size();
  const double whole_s = thread_cpu_seconds() - cpu_whole0;

  const nlohmann::json result = {
      {"corpus", corpus_path},
      {"lines", lines.size()},
      {"bytes", n_bytes},
      {"tokens_per_pass", sink / (warm_cpu.size() + 1)},
      {"load_seconds", load_s},
      {"cold_mb_per_s", mb / cold.cpu_s},
      {"warm_mb_per_s", mb / median(warm_cpu)},
      {"cold_wall_mb_per_s", mb / cold.wall_s},
      {"warm_wall_mb_per_s", mb / median(warm_wall)},
      {"warm_passes", warm_cpu.size()},
      {"whole_text_mb_per_s", static_cast<double>(whole.size()) / 1e6 / whole_s},
      {"whole_text_tokens", n_tokens_whole}};
  std::printf("%s\n", result.dump(2).c_str());
  return 0;
}

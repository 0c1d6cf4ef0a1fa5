// replay_drift: how far bounded SWA replay after a prefix hit moves the logits, on the tiny model.
// For each random prompt of n_cached + n_suffix tokens it runs, on the CPU reference:
//   cold    — the whole prompt in one forward (the reference),
//   exact   — a prefix hit of n_cached tokens replaying the receptive field L·(W−1)+4 (what
//             replay_mode=exact does): must equal cold bit for bit,
//   bounded — the same hit replaying only the last W tokens with the window floored there (what
//             replay_mode=bounded does; DeepSeek / vLLM / TRT-LLM behaviour),
// and reports max / mean |logit − cold| and top-1 agreement at sampled suffix positions, overall
// and per distance from the hit boundary. Prints a table; --out writes the JSON record.
#include <sys/utsname.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deepinfer/model.h"
#include "engine/loaded_model.h"

namespace deepinfer {
namespace {

struct Args {
  std::string model = "demo";
  std::string numerics = "official";
  int n_prompts = 4, n_cached = 1024, n_suffix = 896, every = 8;
  std::string out;
};

std::vector<int32_t> random_ids(int64_t n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3));
  return ids;
}

// Logits at `wanted` positions for tokens [start, n) of `ids` in slot `slot`, with history
// blocks `table` and the prefix-hit fields of the span.
std::vector<std::vector<float>> run(engine::LoadedModel& lm, model::KvState& state, int32_t slot,
                                    const std::vector<int32_t>& ids, int32_t start, int32_t n_cached,
                                    const std::vector<int32_t>& table, const std::vector<int32_t>& wanted) {
  state.reset_slot(slot);
  model::ForwardBatch b;
  const auto n = static_cast<int32_t>(ids.size());
  b.seqs.push_back(ops::SeqSpan{slot, 0, n - start, start, n_cached, start});
  for (int32_t p = start; p < n; ++p) {
    b.token_ids.push_back(ids[static_cast<size_t>(p)]);
    b.positions.push_back(p);
  }
  for (int32_t p : wanted) b.logit_rows.push_back(p - start);
  b.max_blocks = static_cast<int32_t>(table.size());
  b.block_tables = table;
  auto r = lm.model->forward(b, state);
  if (!r.is_ok()) {
    std::fprintf(stderr, "forward failed: %s\n", r.status().to_string().c_str());
    std::exit(1);
  }
  std::vector<std::vector<float>> out;
  const int64_t V = r->logits.shape[1];
  for (size_t i = 0; i < wanted.size(); ++i) {
    const float* row = r->logits.as<const float>() + static_cast<int64_t>(i) * V;
    out.emplace_back(row, row + V);
  }
  return out;
}

struct Bucket {
  double max_abs = 0, sum_abs = 0;
  int64_t n_values = 0, n_rows = 0, n_top1 = 0;
  double sum_std = 0, sum_margin = 0;  // scale of the reference rows: logit std, top-1 − top-2
  void add(const std::vector<float>& a, const std::vector<float>& ref) {
    double mean = 0, sq = 0;
    for (float x : ref) mean += x;
    mean /= static_cast<double>(ref.size());
    for (float x : ref) sq += (x - mean) * (x - mean);
    sum_std += std::sqrt(sq / static_cast<double>(ref.size()));
    float first = -INFINITY, second = -INFINITY;
    for (float x : ref) {
      if (x > first) {
        second = first;
        first = x;
      } else if (x > second) {
        second = x;
      }
    }
    sum_margin += first - second;
    for (size_t v = 0; v < a.size(); ++v) {
      const double d = std::fabs(static_cast<double>(a[v]) - ref[v]);
      max_abs = std::max(max_abs, d);
      sum_abs += d;
    }
    n_values += static_cast<int64_t>(a.size());
    ++n_rows;
    n_top1 += std::max_element(a.begin(), a.end()) - a.begin() == std::max_element(ref.begin(), ref.end()) - ref.begin();
  }
  nlohmann::json to_json() const {
    return {{"max_abs_logit_drift", max_abs},
            {"mean_abs_logit_drift", n_values ? sum_abs / n_values : 0.0},
            {"top1_agreement", n_rows ? static_cast<double>(n_top1) / n_rows : 1.0},
            {"n_positions", n_rows},
            {"cold_logit_std_mean", n_rows ? sum_std / n_rows : 0.0},
            {"cold_top1_top2_margin_mean", n_rows ? sum_margin / n_rows : 0.0}};
  }
};

std::string shell(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

int main_impl(const Args& a) {
  auto dir = resolve_model_dir(a.model);
  if (!dir.is_ok()) return std::fprintf(stderr, "%s\n", dir.status().to_string().c_str()), 1;
  auto numerics = engine::parse_numerics(a.numerics);
  auto loaded = engine::load_model(*dir, engine::LoadOptions{*numerics, "cpu"});
  if (!loaded.is_ok()) return std::fprintf(stderr, "%s\n", loaded.status().to_string().c_str()), 1;
  engine::LoadedModel& lm = **loaded;
  const loader::ModelConfig& c = lm.config;
  const auto W = static_cast<int32_t>(c.sliding_window);
  const int32_t block = 256, n_total = a.n_cached + a.n_suffix;
  const int32_t n_tail_blocks = (n_total + block - 1) / block - a.n_cached / block;
  // Shared prefix blocks, then a private tail per run (each run writes its own new rows).
  model::KvState state(c, model::KvStateOptions{3, a.n_cached / block + 3 * n_tail_blocks, block, lm.model->act_dtype()},
                       lm.ops.get());
  auto table = [&](int run) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < a.n_cached / block; ++i) t.push_back(i);
    for (int32_t i = 0; i < n_tail_blocks; ++i) t.push_back(a.n_cached / block + run * n_tail_blocks + i);
    return t;
  };
  const int32_t r_exact = std::max<int32_t>(0, a.n_cached - static_cast<int32_t>(c.num_hidden_layers * (W - 1) + 4));
  const int32_t r_bounded = a.n_cached - W;
  std::vector<int32_t> wanted;
  for (int32_t p = a.n_cached; p < n_total; p += a.every) wanted.push_back(p);
  Bucket overall;
  std::vector<Bucket> by_distance(static_cast<size_t>((a.n_suffix + W - 1) / W));
  bool exact_ok = true;
  for (int i = 0; i < a.n_prompts; ++i) {
    const auto ids = random_ids(n_total, 1000 + i, c.vocab_size);
    const auto cold = run(lm, state, 0, ids, 0, 0, table(0), wanted);
    const auto exact = run(lm, state, 1, ids, r_exact, a.n_cached, table(1), wanted);
    const auto bounded = run(lm, state, 2, ids, r_bounded, a.n_cached, table(2), wanted);
    exact_ok = exact_ok && exact == cold;
    Bucket prompt;
    for (size_t k = 0; k < wanted.size(); ++k) {
      prompt.add(bounded[k], cold[k]);
      overall.add(bounded[k], cold[k]);
      by_distance[static_cast<size_t>((wanted[k] - a.n_cached) / W)].add(bounded[k], cold[k]);
    }
    std::printf("prompt %d: max |drift| %.4g  mean |drift| %.4g  top-1 agreement %lld/%lld  exact==cold: %s\n", i,
                prompt.max_abs, prompt.sum_abs / prompt.n_values, static_cast<long long>(prompt.n_top1),
                static_cast<long long>(prompt.n_rows), exact == cold ? "yes" : "NO");
  }
  std::printf("overall: max |drift| %.4g  mean |drift| %.4g  top-1 agreement %.3f over %lld positions "
              "(cold logits: std %.3g, top-1 margin %.3g)\n",
              overall.max_abs, overall.sum_abs / overall.n_values,
              static_cast<double>(overall.n_top1) / overall.n_rows, static_cast<long long>(overall.n_rows),
              overall.sum_std / overall.n_rows, overall.sum_margin / overall.n_rows);
  nlohmann::json distance = nlohmann::json::array();
  for (size_t d = 0; d < by_distance.size(); ++d) {
    nlohmann::json j = by_distance[d].to_json();
    j["positions_after_hit"] = std::to_string(d * W) + ".." + std::to_string((d + 1) * W - 1);
    distance.push_back(j);
    std::printf("  positions H+%zu..H+%zu: max %.4g mean %.4g top-1 %.3f\n", d * W, (d + 1) * W - 1,
                by_distance[d].max_abs, by_distance[d].sum_abs / std::max<int64_t>(1, by_distance[d].n_values),
                static_cast<double>(by_distance[d].n_top1) / std::max<int64_t>(1, by_distance[d].n_rows));
  }
  if (!a.out.empty()) {
    utsname u{};
    uname(&u);
    nlohmann::json rec = {
        {"what", "logit drift of bounded SWA replay (replay the last W tokens, window floored at H-W) vs the cold run, "
                 "after a prefix hit of H tokens; exact replay (L*(W-1)+4 tokens) checked bit-equal to cold"},
        {"model", *dir}, {"numerics", a.numerics},
        {"config", {{"layers", c.num_hidden_layers}, {"window", W}, {"vocab", c.vocab_size}}},
        {"n_prompts", a.n_prompts}, {"n_cached_H", a.n_cached}, {"n_suffix", a.n_suffix},
        {"position_stride", a.every}, {"replay_start_bounded", r_bounded}, {"replay_start_exact", r_exact},
        {"exact_equals_cold", exact_ok}, {"bounded_vs_cold", overall.to_json()}, {"by_distance", distance},
        {"command", "./build/bench/engine/replay_drift --out " + a.out},
        {"commit", shell("git -C " DI_SOURCE_DIR " rev-parse --short HEAD")},
        {"machine", std::string(u.sysname) + " " + u.machine + ", " + shell("nproc") + " cores"},
        {"date", shell("date -u +%Y-%m-%dT%H:%M:%SZ")}};
    std::ofstream(a.out) << rec.dump(2) << "\n";
    std::printf("wrote %s\n", a.out.c_str());
  }
  return exact_ok ? 0 : 2;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  deepinfer::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--numerics") a.numerics = v;
    else if (k == "--prompts") a.n_prompts = std::stoi(v);
    else if (k == "--cached") a.n_cached = std::stoi(v);
    else if (k == "--suffix") a.n_suffix = std::stoi(v);
    else if (k == "--every") a.every = std::stoi(v);
    else if (k == "--out") a.out = v;
    else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
  }
  return deepinfer::main_impl(a);
}

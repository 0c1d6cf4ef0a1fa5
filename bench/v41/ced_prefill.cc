// ced_prefill: what compact CED prefill (model_v41_flash.md §2.3) costs in accuracy and saves in
// work, on the tiny V4.1 model (CPU reference, official numerics). For random prompts of several
// lengths it runs one exact prefill (every row through all 12 layers) and compact prefills keeping
// the last K prompt rows for the decoder layers, and reports at the prompt's last position
// max / mean |logit - exact| and top-1 agreement, plus the counted multiply-adds of the whole
// prefill (matrix work: linears, experts, attention, indexer). Prints a table; --out writes JSON.
#include <sys/utsname.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "counting_ops.h"
#include "deepinfer/model.h"
#include "loader/checkpoint.h"
#include "loader/engram_layout.h"
#include "loader/model_config.h"
#include "loader/weights_v41.h"
#include "model/v41/model_v41.h"

namespace deepinfer {
namespace {

struct Runner {
  loader::ModelConfig config;
  bench::CountingOps ops;
  std::unique_ptr<model::ModelV41> model;
};

std::unique_ptr<Runner> open(const std::string& dir, const loader::Checkpoint& ckpt, model::ModelOptions mo) {
  auto r = std::make_unique<Runner>();
  auto cfg = loader::load_model_config(dir);
  if (!cfg.is_ok()) return nullptr;
  r->config = *cfg;
  loader::CheckpointSource source(ckpt);
  auto w = loader::bind_weights_v41(r->config, source);
  auto map = loader::load_engram_sidecar(r->config, dir);
  if (!w.is_ok() || !map.is_ok()) return nullptr;
  r->model = std::make_unique<model::ModelV41>(r->config, std::move(w).value(), std::move(map).value(), &r->ops, mo);
  return r;
}

// Last-row logits of a one-shot prefill of `ids` and the multiply-adds it took.
std::vector<float> prefill(Runner& r, const std::vector<int32_t>& ids, int64_t* macs) {
  const int32_t n = static_cast<int32_t>(ids.size()), bt = 16;
  model::KvState state(r.config, model::KvStateOptions{1, n / bt + 1, bt, r.model->act_dtype()}, &r.ops);
  state.reset_slot(0);
  model::ForwardBatch b;
  b.token_ids = ids;
  for (int32_t i = 0; i < n; ++i) b.positions.push_back(i);
  b.seqs.push_back({0, 0, n, 0, 0, 0});
  b.max_blocks = n / bt + 1;
  for (int32_t k = 0; k < b.max_blocks; ++k) b.block_tables.push_back(k);
  b.logit_rows = {n - 1};
  b.n_prompt = {n};
  r.ops.macs = 0;
  auto res = r.model->forward(b, state);
  if (!res.is_ok()) {
    std::fprintf(stderr, "forward: %s\n", res.status().to_string().c_str());
    std::exit(1);
  }
  *macs = r.ops.macs;
  const float* p = res->logits.as<const float>();
  return std::vector<float>(p, p + r.config.vocab_size);
}

std::string machine() {
  utsname u{};
  uname(&u);
  std::ifstream la("/proc/loadavg");
  std::string load;
  std::getline(la, load);
  return std::string(u.machine) + " " + u.release + ", load average " + load.substr(0, 14);
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  using namespace deepinfer;
  std::string out;
  int n_seeds = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    if (a == "--seeds" && i + 1 < argc) n_seeds = std::stoi(argv[++i]);
  }
  auto dir = resolve_model_dir(kDemoV41ModelName);
  if (!dir.is_ok()) return std::fprintf(stderr, "%s\n", dir.status().to_string().c_str()), 1;
  auto ckpt = loader::Checkpoint::open(*dir);
  if (!ckpt.is_ok()) return 1;
  model::ModelOptions exact_opts;
  auto exact = open(*dir, *ckpt, exact_opts);
  const std::vector<int> keeps = {20, 43, 140};  // W + 12 rewind (DeepInfer's 140 analogue), exact bound, default
  std::vector<std::unique_ptr<Runner>> compact;
  for (int k : keeps) {
    model::ModelOptions o;
    o.prefill_mode = model::PrefillMode::kCompact;
    o.keep_tokens = k;
    compact.push_back(open(*dir, *ckpt, o));
  }
  if (!exact) return std::fprintf(stderr, "cannot open %s\n", dir->c_str()), 1;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::printf("%6s %5s %12s %12s %8s %11s %11s %6s\n", "prompt", "keep", "MAC exact", "MAC compact", "saved",
              "max|dlogit|", "mean|dlog|", "top-1");
  for (int n : {64, 128, 256, 512}) {
    for (size_t ki = 0; ki < keeps.size(); ++ki) {
      double worst = 0, mean = 0;
      int agree = 0;
      int64_t macs_exact = 0, macs_compact = 0;
      for (int s = 0; s < n_seeds; ++s) {
        std::mt19937_64 rng(1000 * n + s);
        std::vector<int32_t> ids(static_cast<size_t>(n));
        for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % 509);
        int64_t me = 0, mc = 0;
        const auto le = prefill(*exact, ids, &me);
        const auto lc = prefill(*compact[ki], ids, &mc);
        macs_exact += me, macs_compact += mc;
        double sum = 0;
        for (size_t v = 0; v < le.size(); ++v) {
          const double d = std::fabs(static_cast<double>(le[v]) - lc[v]);
          worst = std::max(worst, d), sum += d;
        }
        mean += sum / static_cast<double>(le.size()) / n_seeds;
        agree += std::max_element(le.begin(), le.end()) - le.begin() == std::max_element(lc.begin(), lc.end()) - lc.begin();
      }
      const double saved = 1.0 - static_cast<double>(macs_compact) / static_cast<double>(macs_exact);
      std::printf("%6d %5d %12lld %12lld %7.1f%% %11.4g %11.4g %3d/%d\n", n, keeps[ki],
                  static_cast<long long>(macs_exact / n_seeds), static_cast<long long>(macs_compact / n_seeds),
                  100 * saved, worst, mean, agree, n_seeds);
      rows.push_back({{"prompt_tokens", n}, {"keep_tokens", keeps[ki]}, {"prompts", n_seeds},
                      {"macs_exact_per_prompt", macs_exact / n_seeds}, {"macs_compact_per_prompt", macs_compact / n_seeds},
                      {"flops_saved_fraction", saved}, {"max_abs_logit_diff", worst}, {"mean_abs_logit_diff", mean},
                      {"top1_agree", agree}});
    }
  }
  if (!out.empty()) {
    nlohmann::ordered_json j;
    j["what"] = "compact vs exact CED prefill on tiny-v41 (model_v41_flash.md §2.3, §13): last-prompt-position logit "
                "difference and counted prefill multiply-adds (linears, experts, attention, indexer); CPU reference, "
                "official numerics";
    j["command"] = "ninja -C build-v41 ced_prefill && OMP_NUM_THREADS=1 ./build-v41/bench/v41/ced_prefill --out bench/results/v41_ced_prefill.json";
    j["machine"] = machine();
    j["results"] = rows;
    std::ofstream(out) << j.dump(2) << "\n";
  }
  return 0;
}

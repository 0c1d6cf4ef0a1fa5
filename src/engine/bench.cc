// run_benchmark (include/deepinfer/bench.h): decode and prefill throughput at context frontiers,
// roofline shares and a per-op breakdown, as JSON.
#include <algorithm>
#include <chrono>
#include <numeric>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "base/log.h"
#include "deepinfer/bench.h"
#include "deepinfer/model.h"
#include "engine/bench_baseline.h"
#include "base/status.h"
#include "engine/bench_model.h"
#include "engine/device_backend.h"
#include "engine/kernel_timeline.h"
#include "engine/loaded_model.h"
#include "model/model.h"
#include "ops/timing_ops.h"
#ifdef DI_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace deepinfer {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchModel {
  loader::ModelConfig config;
  std::unique_ptr<ops::Ops> ops;
  std::unique_ptr<engine::LoadedModel> loaded;      // from a checkpoint
  std::unique_ptr<loader::TensorSource> synthetic;  // or generated on the device
  loader::ModelWeights weights;
  std::unique_ptr<model::Model> model;
};

Result<BenchModel> build_model(const BenchOptions& o, model::Numerics numerics) {
  BenchModel b;
  if (!o.model.empty()) {
    DI_ASSIGN_OR_RETURN(const std::string dir, resolve_model_dir(o.model));
    DI_ASSIGN_OR_RETURN(b.loaded, engine::load_model(dir, engine::LoadOptions{numerics, o.device}));
    b.config = b.loaded->config;
    auto* m = dynamic_cast<model::Model*>(b.loaded->model.get());
    if (m == nullptr) return unimplemented("bench: only DeepSeek-V4 checkpoints are benchmarked so far");
    return b;
  }
  b.config = engine::v4_flash_config(o.layers);
  DI_ASSIGN_OR_RETURN(b.ops, engine::make_ops(o.device));
  DI_ASSIGN_OR_RETURN(b.synthetic, engine::synthetic_device_weights(b.config, b.ops.get(), 7));
  DI_ASSIGN_OR_RETURN(b.weights, loader::bind_weights(b.config, *b.synthetic));
  b.model = std::make_unique<model::Model>(b.config, b.weights, b.ops.get(), model::ModelOptions{numerics});
  return b;
}

model::LanguageModel& model_of(BenchModel& b) { return b.loaded ? *b.loaded->model : *b.model; }
ops::Ops* ops_of(BenchModel& b) { return b.loaded ? b.loaded->ops.get() : b.ops.get(); }

// One decode step of `batch` sequences whose history holds `context` tokens.
model::ForwardBatch decode_batch(int64_t batch, int64_t context, int32_t block_tokens) {
  model::ForwardBatch fb;
  const int32_t n_blocks = static_cast<int32_t>(context / block_tokens + 1);
  fb.max_blocks = n_blocks;
  for (int64_t s = 0; s < batch; ++s) {
    fb.token_ids.push_back(static_cast<int32_t>(1000 + s * 37 % 100000));
    fb.positions.push_back(static_cast<int32_t>(context));
    fb.seqs.push_back({static_cast<int32_t>(s), static_cast<int32_t>(s), 1, static_cast<int32_t>(context), 0, 0});
    for (int32_t k = 0; k < n_blocks; ++k) fb.block_tables.push_back(static_cast<int32_t>(s * n_blocks + k));
    fb.logit_rows.push_back(static_cast<int32_t>(s));
  }
  return fb;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Decode warm-up: at least o.warmup steps and this long (bounded by kBenchMaxWarmSteps). The first
// decode row of a run warms up longer: its shape had read 3-4% below the same binary's A/B runs in
// two recorded runs (the GPU idle or busy with the transformers baseline just before), the later
// shapes not.
constexpr double kBenchWarmSeconds = 0.2, kBenchFirstWarmSeconds = 1.5;
constexpr int kBenchMaxWarmSteps = 1000;

// A decode shape's timing: the median step (forward + synchronize) and the median time until
// forward() returned — the host's share (the prepare pass, uploads, the graph launch), during which
// a synchronous decode loop leaves the GPU idle — with, where steps were replayed from graphs,
// the mean prepare pass and graph launch of the timed steps.
struct DecodeTiming {
  double step_s = 0, host_s = 0;
  double prepare_us = 0, launch_us = 0;  // 0: no replayed steps
  // What the engine adds to a step to sample it (ModelRunner::forward's two paths), device logits
  // only: the logits copied into page-locked host memory for the host sampler, or (plain greedy
  // steps) the device's argmax_rows and the ids copied back. Medians of kSampleReps, 0 = not run.
  double logits_to_host_s = 0, argmax_s = 0;
  double sample_s = 0;  // plain temperature steps: Ops::sample_rows (T = 1) and the ids copied back
};
constexpr int kSampleReps = 5;

// The sampling paths' costs for the last step's logits (DecodeTiming). `pinned`: the run's
// page-locked buffer for the logits, allocated by the first call for `max_rows` rows (page-locked
// memory stays with the Ops: one buffer for every row, not one per row).
void time_sampling(ops::Ops* ops, const tensor::TensorView& logits, int64_t max_rows, tensor::TensorView& pinned,
                   DecodeTiming& out) {
  if (logits.device == tensor::Device::kCpu || logits.numel() == 0 || logits.rank != 2) return;
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  if (pinned.empty()) pinned = ops->alloc_host(tensor::DType::kF32, {std::max(max_rows, rows) * vocab});
  DI_CHECK(pinned.numel() >= rows * vocab, "bench: {} logit rows beyond the largest batch", rows);
  // The engine's buffers: logits into page-locked memory (ModelRunner::forward), ids into a vector.
  const tensor::TensorView host = tensor::TensorView::contiguous(pinned.data, tensor::DType::kF32, {rows, vocab});
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  std::vector<double> copy_t, argmax_t, sample_t;
  std::vector<ops::Ops::SampleRow> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) params[static_cast<size_t>(r)] = {1.0f, 0.0f, static_cast<uint64_t>(r), 4096};
  for (int i = 0; i < kSampleReps; ++i) {
    auto t0 = Clock::now();
    ops->copy(logits, host);
    copy_t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    const tensor::TensorView d_ids = ops->alloc(tensor::DType::kI32, {rows});  // [rows] on the device
    ops->argmax_rows(logits, d_ids);
    ops->copy(d_ids, tensor::TensorView::contiguous(ids.data(), tensor::DType::kI32, {rows}));
    argmax_t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    ops->sample_rows(logits, params, d_ids);
    ops->copy(d_ids, tensor::TensorView::contiguous(ids.data(), tensor::DType::kI32, {rows}));
    sample_t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  out.logits_to_host_s = median(copy_t);
  out.argmax_s = median(argmax_t);
  out.sample_s = median(sample_t);
}

Result<DecodeTiming> time_decode(BenchModel& b, const BenchOptions& o, int64_t batch, int64_t context,
                                 model::KvState& state, double warm_seconds, tensor::TensorView& pinned) {
  const model::ForwardBatch fb = decode_batch(batch, context, state.options().block_tokens);
  std::vector<double> host;
  tensor::TensorView logits;  // the last step's, valid until the next forward
  auto step = [&]() -> Result<double> {
    const auto t0 = Clock::now();
    auto r = model_of(b).forward(fb, state);
    if (!r.is_ok()) return r.status();
    logits = r->logits;
    host.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    ops_of(b)->synchronize();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double warm = 0.0;
  for (int i = 0; i < o.warmup || (warm < warm_seconds && i < kBenchMaxWarmSteps); ++i) {
    DI_ASSIGN_OR_RETURN(const double t, step());
    warm += t;
  }
  host.clear();
  const ops::Ops::GraphHostTime before = ops_of(b)->graph_host_time();
  std::vector<double> times;
  for (int i = 0; i < o.iters; ++i) {
    DI_ASSIGN_OR_RETURN(const double t, step());
    times.push_back(t);
  }
  const ops::Ops::GraphHostTime after = ops_of(b)->graph_host_time();
  DecodeTiming out{median(times), median(host)};
  if (const int64_t n = after.replayed - before.replayed; n > 0) {
    out.prepare_us = (after.prepare_us - before.prepare_us) / static_cast<double>(n);
    out.launch_us = (after.launch_us - before.launch_us) / static_cast<double>(n);
  }
  time_sampling(ops_of(b), logits, *std::max_element(o.batches.begin(), o.batches.end()), pinned, out);
  return out;
}

// The engine's greedy decode loop under asynchronous scheduling (EngineOptions::async_scheduling)
// for one decode shape: each step's input tokens are the ids the step before picked on the device
// (ForwardBatch::token_from reading `ids`), its argmax is queued behind it with the ids' copy to
// one of the two page-locked buffers, and the host waits for step i's ids only after queuing step
// i + 1 — so one step's prepare pass and graph launch overlap the device's work on the step
// before, as in the engine.
struct PipelinedDecode {
  model::ForwardBatch fb;
  tensor::TensorView ids, host[2];  // [batch] I32 on the device / the host
  uint64_t ticket[2] = {0, 0};

  PipelinedDecode(ops::Ops* ops, int64_t batch, int64_t context, int32_t block_tokens)
      : fb(decode_batch(batch, context, block_tokens)),
        ids(ops->alloc_persistent(tensor::DType::kI32, {batch})),
        host{ops->alloc_host(tensor::DType::kI32, {batch}), ops->alloc_host(tensor::DType::kI32, {batch})} {
    fb.token_from.resize(static_cast<size_t>(batch));
    for (int64_t s = 0; s < batch; ++s) fb.token_from[static_cast<size_t>(s)] = static_cast<int32_t>(s);
    fb.token_source = ids;
  }
  // n steps from an idle device to the last ids on the host; seconds per step.
  Result<double> run(BenchModel& b, model::KvState& state, int n) {
    ops::Ops* ops = ops_of(b);
    ops->synchronize();
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      auto r = model_of(b).forward(fb, state);
      if (!r.is_ok()) return r.status();
      ops->argmax_rows(r->logits, ids);
      ticket[i & 1] = ops->copy_to_host_async(ids, host[i & 1]);
      if (i > 0) ops->wait_host_copy(ticket[(i - 1) & 1]);
    }
    ops->wait_host_copy(ticket[(n - 1) & 1]);
    return std::chrono::duration<double>(Clock::now() - t0).count() / n;
  }
};

// Seconds per step of that loop: the median of three runs of o.iters steps after warm-up, each from
// an idle device to the last ids on the host.
Result<double> time_decode_pipelined(BenchModel& b, const BenchOptions& o, int64_t batch, int64_t context,
                                     model::KvState& state, double warm_seconds) {
  PipelinedDecode loop(ops_of(b), batch, context, state.options().block_tokens);
  auto run = [&](int n) { return loop.run(b, state, n); };
  for (double warm = 0; warm < warm_seconds;) {
    DI_ASSIGN_OR_RETURN(const double t, run(std::max(o.warmup, 1)));
    warm += t * std::max(o.warmup, 1);
    if (t <= 0) break;
  }
  std::vector<double> t;
  for (int k = 0; k < 3; ++k) {
    DI_ASSIGN_OR_RETURN(const double s, run(o.iters));
    t.push_back(s);
  }
  return median(t);
}

// Chunk [begin, begin + len) of an n-token prompt in sequence slot 0.
model::ForwardBatch prefill_batch(int64_t n, int64_t begin, int64_t len, int32_t block_tokens) {
  model::ForwardBatch fb;
  fb.max_blocks = static_cast<int32_t>(n / block_tokens + 1);
  for (int32_t k = 0; k < fb.max_blocks; ++k) fb.block_tables.push_back(k);
  for (int64_t i = 0; i < len; ++i) {
    fb.token_ids.push_back(static_cast<int32_t>((begin + i) * 7919 % 100000 + 3));
    fb.positions.push_back(static_cast<int32_t>(begin + i));
  }
  fb.seqs.push_back({0, 0, static_cast<int32_t>(len), static_cast<int32_t>(begin), 0, 0});
  fb.logit_rows.push_back(static_cast<int32_t>(len - 1));
  return fb;
}

Result<double> time_prefill(BenchModel& b, const BenchOptions& o, int64_t n, model::KvState& state) {
  std::vector<double> times;
  for (int it = 0; it < std::max(1, o.iters / 2) + 1; ++it) {
    state.reset_slot(0);
    const auto t0 = Clock::now();
    for (int64_t begin = 0; begin < n; begin += o.prefill_chunk) {
      const int64_t len = std::min<int64_t>(o.prefill_chunk, n - begin);
      auto r = model_of(b).forward(prefill_batch(n, begin, len, state.options().block_tokens), state);
      if (!r.is_ok()) return r.status();
    }
    ops_of(b)->synchronize();
    if (it > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());  // first = warm-up
  }
  return median(times);
}

json gpu_info(double* copy_gbs) {
  json g = {{"name", "cpu"}};
  *copy_gbs = 0;
#ifdef DI_HAVE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    g = {{"name", prop.name}, {"sm_count", prop.multiProcessorCount}, {"memory_gib", prop.totalGlobalMem / double(1 << 30)}};
    // Copy bandwidth ceiling: a 2 GiB device-to-device copy, bytes read + written.
    const size_t bytes = size_t{2} << 30;
    void *a = nullptr, *c = nullptr;
    if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&c, bytes) == cudaSuccess) {
      cudaMemset(a, 1, bytes);
      std::vector<double> t;
      for (int i = 0; i < 6; ++i) {
        cudaDeviceSynchronize();
        const auto t0 = Clock::now();
        cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        if (i > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      *copy_gbs = 2.0 * bytes / median(t) / 1e9;
    }
    cudaFree(a);
    cudaFree(c);
    g["copy_bandwidth_gbs"] = *copy_gbs;
  }
#endif
  return g;
}

json model_json(const loader::ModelConfig& c) {
  return {{"layers", c.num_hidden_layers}, {"hidden", c.hidden_size}, {"heads", c.num_attention_heads},
          {"head_dim", c.head_dim}, {"experts", c.n_routed_experts}, {"experts_per_tok", c.num_experts_per_tok},
          {"moe_inter", c.moe_intermediate_size}, {"vocab", c.vocab_size}, {"window", c.sliding_window},
          {"index_topk", c.index_topk}};
}

// A timeline summary's largest idle gaps, with the kernels around them.
json gaps_json(const engine::TimelineSummary& s) {
  json gaps = json::array();
  for (const engine::TimelineGap& g : s.largest_gaps) {
    gaps.push_back({{"us", g.us}, {"at_us", g.at_us}, {"before", g.before.substr(0, 120)}, {"after", g.after.substr(0, 120)}});
  }
  return gaps;
}

// One more decode step recorded by `timeline`: the summary (idle time, largest gaps) and, with
// `launches`, every kernel's start and duration from the step's first kernel.
Result<json> timeline_json(BenchModel& b, engine::KernelTimeline& timeline, const model::ForwardBatch& fb,
                           model::KvState& state, bool launches) {
  DI_RETURN_IF_ERROR(timeline.begin());
  auto r = model_of(b).forward(fb, state);
  ops_of(b)->synchronize();
  DI_ASSIGN_OR_RETURN(std::vector<engine::KernelSpan> spans, timeline.end());
  if (!r.is_ok()) return r.status();
  const engine::TimelineSummary s = engine::summarize_timeline(spans, 12);
  json out = {{"kernels", s.kernels}, {"span_us", s.span_us}, {"busy_us", s.busy_us}, {"idle_us", s.idle_us},
              {"kernel_sum_us", s.kernel_sum_us}, {"largest_gaps", gaps_json(s)}};
  if (launches && !spans.empty()) {
    json list = json::array();
    for (const engine::KernelSpan& k : spans) {
      list.push_back({{"name", k.name.substr(0, 120)}, {"start_us", (k.start_ns - spans.front().start_ns) / 1e3},
                      {"us", (k.end_ns - k.start_ns) / 1e3}, {"stream", k.stream}, {"ctas", k.ctas}});
    }
    out["launches"] = std::move(list);
  }
  return out;
}

// Three steps of the asynchronous decode loop (PipelinedDecode) as the GPU runs them: the span per
// step and the idle time, whose largest gaps include what lies between one step's kernels and the
// next's (the sampling launches, the ids' copy, the staging copy, the graph launch).
Result<json> pipelined_timeline_json(BenchModel& b, engine::KernelTimeline& timeline, int64_t batch, int64_t context,
                                     model::KvState& state) {
  constexpr int kSteps = 3;
  PipelinedDecode loop(ops_of(b), batch, context, state.options().block_tokens);
  DI_RETURN_IF_ERROR(loop.run(b, state, kSteps).status());  // replays, not recordings, below
  DI_RETURN_IF_ERROR(timeline.begin());
  auto r = loop.run(b, state, kSteps);
  DI_ASSIGN_OR_RETURN(std::vector<engine::KernelSpan> spans, timeline.end());
  if (!r.is_ok()) return r.status();
  const engine::TimelineSummary s = engine::summarize_timeline(spans, 8);
  json out = {{"steps", kSteps}, {"kernels", s.kernels}, {"span_us_per_step", s.span_us / kSteps},
              {"idle_us_per_step", s.idle_us / kSteps}, {"largest_gaps", gaps_json(s)}};
  return out;
}

// Per-op times of one forward (and, in *by_linear, per linear weight shape): the mean over
// kBreakdownForwards forwards after one untimed, through a second Model over the bench model's own
// weights — the copies its backend prepared included (a Model over bind_weights' views left the
// BF16 LM head without its packed copy, so at batch 512 each breakdown launch re-packed 1 GB,
// which the model's steps never do, and a single timed forward counted first-use costs too:
// 2.3-3.9 ms recorded in `…_v36.json` to `…_v48.json` for a launch the steps run in ~0.9).
constexpr int kBreakdownForwards = 3;
Result<json> breakdown(BenchModel& b, model::KvState& state, const model::ForwardBatch& fb, json* by_linear) {
  const auto* m = dynamic_cast<const model::Model*>(&model_of(b));
  if (m == nullptr) return json::object();  // (build_model admits V4 models only)
  ops::TimingOps timing(ops_of(b));
  model::Model timed(m->config(), m->weights(), &timing, m->options());
  for (int i = 0; i <= kBreakdownForwards; ++i) {
    if (i == 1) timing.reset();  // the first forward is the warm-up
    DI_RETURN_IF_ERROR(timed.forward(fb, state).status());
  }
  double total = 0;
  for (const auto& [name, v] : timing.totals()) total += v.second;
  json out = json::object();
  for (const auto& [name, v] : timing.totals()) {
    out[name] = {{"calls", v.first / kBreakdownForwards},
                 {"ms", v.second * 1e3 / kBreakdownForwards},
                 {"share", total > 0 ? v.second / total : 0}};
  }
  for (const auto& [name, v] : timing.linear_totals()) {
    (*by_linear)[name] = {{"calls", v.first / kBreakdownForwards}, {"ms", v.second * 1e3 / kBreakdownForwards}};
  }
  return out;
}

}  // namespace

Result<std::string> run_benchmark(const BenchOptions& o) {
  if (o.iters < 1) return invalid_argument("--iters must be >= 1 (got {})", o.iters);
  DI_ASSIGN_OR_RETURN(const model::Numerics numerics, engine::parse_numerics(o.numerics));
  DI_ASSIGN_OR_RETURN(BenchModel b, build_model(o, numerics));
  double copy_gbs = 0;
  json result;
  result["gpu"] = gpu_info(&copy_gbs);
  result["commit"] = o.commit;
  result["command"] = o.command;
  result["date"] = engine::utc_timestamp();
  result["numerics"] = o.numerics;
  result["model"] = model_json(b.config);
  // Decode steps replay recorded CUDA graphs when the backend has them on (DEEPINFER_CUDA_GRAPHS).
  result["cuda_graphs"] = ops_of(b)->graphs_enabled();
  result["rows"] = json::array();
  const int32_t block_tokens = std::max(256, b.config.max_ratio());
  std::unique_ptr<engine::KernelTimeline> timeline;
  if (o.timeline && ops_of(b)->device() == tensor::Device::kCpu) {
    log_warn("bench: --timeline records GPU kernels; the CPU device has none");
    result["timeline_error"] = "the CPU device runs no GPU kernels";
  } else if (o.timeline) {
    auto t = engine::KernelTimeline::open();
    if (t.is_ok()) {
      timeline = std::move(*t);
    } else {
      log_warn("bench: no kernel timeline: {}", t.status().to_string());
      result["timeline_error"] = t.status().to_string();
    }
  }
  // Rows whose KV would not fit are skipped: the budget is --memory-budget-gib, and on a device
  // that reports its free memory (asked before each row) no more than that less room for the
  // step's workspace, which grows by doubling and keeps the chunk it outgrew until the next step
  // (a 128K-token prefill's reaches 8 GiB; on an H100 the run aborted there before this).
  constexpr double kWorkspaceRoom = 12.0 * double(1 << 30);
  auto budget = [&] {
    double bytes = o.memory_budget_gib * double(1 << 30);
    const int64_t free_bytes = ops_of(b)->device_free_bytes();
    if (free_bytes >= 0) bytes = std::min(bytes, static_cast<double>(free_bytes) - kWorkspaceRoom);
    return bytes;
  };
  // Each row's KV state goes back to the backend when the row is done (KvState::release).
  struct ReleasedAtEnd {
    model::KvState& state;
    ~ReleasedAtEnd() { state.release(); }
  };
  auto row_base = [&](const char* kind, int64_t batch, int64_t context) {
    return json{{"kind", kind}, {"batch", batch}, {"context", context}, {"model", model_json(b.config)}};
  };
  // A row whose KV does not fit keeps every field a row has, its figures null, and says why.
  auto skip = [](json& row, double room) {
    row["skipped"] = fmt::format("KV state does not fit the memory budget ({:.1f} GiB)", room / double(1 << 30));
    for (const char* key : {"tokens_per_s", "hbm_roofline_pct", "tensor_peak_pct"}) row[key] = nullptr;
  };
  tensor::TensorView pinned;  // the decode rows' page-locked logits buffer (time_sampling)
  for (int64_t context : o.contexts) {
    for (int64_t batch : o.batches) {
      if (batch <= 0 || context <= 0) continue;  // --batch 0: no decode rows (a prefill-only run)
      json row = row_base("decode", batch, context);
      const int64_t n_blocks = batch * (context / block_tokens + 1);
      if (const double room = budget();
          static_cast<double>(engine::kv_bytes_estimate(b.config, batch, n_blocks, block_tokens)) > room) {
        skip(row, room);
        result["rows"].push_back(row);
        continue;
      }
      model::KvState state(b.config, {static_cast<int32_t>(batch), static_cast<int32_t>(n_blocks), block_tokens,
                                      model_of(b).act_dtype()},
                           ops_of(b));
      const ReleasedAtEnd released{state};
      if (ops_of(b)->device() != tensor::Device::kCpu) DI_RETURN_IF_ERROR(engine::randomize_kv(state, ops_of(b), 11));
      const bool first_row = result["rows"].empty();
      const double warm_s = first_row ? kBenchFirstWarmSeconds : kBenchWarmSeconds;
      DI_ASSIGN_OR_RETURN(const DecodeTiming timing, time_decode(b, o, batch, context, state, warm_s, pinned));
      // The row's rate is the engine's decode loop (asynchronous scheduling, greedy ids picked on
      // the device); sync_* is the model's step alone, forward + synchronize, the host's prepare
      // pass and launch in series with the device (the rows' step_ms before session 32).
      DI_ASSIGN_OR_RETURN(const double t, time_decode_pipelined(b, o, batch, context, state, kBenchWarmSeconds));
      const engine::StepCost cost = engine::decode_step_cost(b.config, batch, context);
      row["step_ms"] = t * 1e3;
      row["sync_step_ms"] = timing.step_s * 1e3;
      row["sync_tokens_per_s"] = static_cast<double>(batch) / timing.step_s;
      row["host_ms"] = timing.host_s * 1e3;  // of sync_step_ms: until forward() returned (see DecodeTiming)
      if (timing.prepare_us > 0) {
        row["graph_prepare_us"] = timing.prepare_us;
        row["graph_launch_us"] = timing.launch_us;
      }
      if (timing.logits_to_host_s > 0) {
        row["logits_to_host_ms"] = timing.logits_to_host_s * 1e3;  // the host sampler's copy (not in step_ms)
        row["device_argmax_ms"] = timing.argmax_s * 1e3;           // greedy steps' path instead (not in step_ms)
        row["device_sample_ms"] = timing.sample_s * 1e3;           // temperature steps' path (not in step_ms)
      }
      row["tokens_per_s"] = static_cast<double>(batch) / t;
      row["bytes_per_step"] = cost.weight_bytes + cost.kv_bytes;
      row["hbm_roofline_pct"] = copy_gbs > 0 ? 100.0 * (cost.weight_bytes + cost.kv_bytes) / t / (copy_gbs * 1e9) : 0.0;
      row["tensor_peak_pct"] = 100.0 * cost.flops / t / (o.fp8_peak_tflops * 1e12);
      log_info("decode batch {} context {}: {:.3f} ms/step, {:.1f} tok/s ({:.3f} ms/step synchronous)", batch, context,
               t * 1e3, batch / t, timing.step_s * 1e3);
      if (timeline != nullptr) {
        const bool launches = !result.contains("timeline_launches_shape");
        auto tl = timeline_json(b, *timeline, decode_batch(batch, context, block_tokens), state, launches);
        if (tl.is_ok()) {  // a profiler that fails (e.g. counters not permitted) costs the row nothing
          if (launches) result["timeline_launches_shape"] = {{"batch", batch}, {"context", context}};
          row["timeline"] = std::move(*tl);
          log_info("  timeline: {} kernels, span {:.1f} us, idle {:.1f} us",
                   row["timeline"]["kernels"].get<int64_t>(), row["timeline"]["span_us"].get<double>(),
                   row["timeline"]["idle_us"].get<double>());
        } else {
          log_warn("bench: kernel timeline failed: {}", tl.status().to_string());
          row["timeline_error"] = tl.status().to_string();
        }
        auto tla = pipelined_timeline_json(b, *timeline, batch, context, state);
        if (tla.is_ok()) {
          row["timeline_async"] = std::move(*tla);
          log_info("  timeline of the async loop: span {:.1f} us, idle {:.1f} us per step",
                   row["timeline_async"]["span_us_per_step"].get<double>(),
                   row["timeline_async"]["idle_us_per_step"].get<double>());
        } else {
          row["timeline_async_error"] = tla.status().to_string();
        }
      }
      // Per-op breakdowns of the first shape and of the largest batch at the first context (the
      // weight-bound and the compute-leaning ends of the grid).
      const bool first = !result.contains("decode_breakdown");
      const bool largest = context == o.contexts.front() && batch == o.batches.back() && batch != o.batches.front();
      if (o.kernel_breakdown && (first || largest)) {
        const std::string key = first ? "decode_breakdown" : "decode_breakdown_large";
        json by_linear = json::object();
        DI_ASSIGN_OR_RETURN(result[key], breakdown(b, state, decode_batch(batch, context, block_tokens), &by_linear));
        if (!by_linear.empty()) result[key + "_by_linear"] = by_linear;
        result[key + "_shape"] = {{"batch", batch}, {"context", context}};
      }
      result["rows"].push_back(row);
    }
  }
  for (int64_t n : o.prefill_lengths) {
    if (n <= 0) continue;  // `--prefill 0`: decode rows only (the kernel profiles' last forward is then a decode step)
    json row = row_base("prefill", 1, n);
    if (const double room = budget();
        static_cast<double>(engine::kv_bytes_estimate(b.config, 1, n / block_tokens + 1, block_tokens)) > room) {
      skip(row, room);
      result["rows"].push_back(row);
      continue;
    }
    model::KvState state(b.config, {1, static_cast<int32_t>(n / block_tokens + 1), block_tokens, model_of(b).act_dtype()},
                         ops_of(b));
    const ReleasedAtEnd released{state};
    DI_ASSIGN_OR_RETURN(const double t, time_prefill(b, o, n, state));
    const engine::StepCost cost = engine::prefill_cost(b.config, n);
    row["seconds"] = t;
    row["tokens_per_s"] = static_cast<double>(n) / t;
    row["hbm_roofline_pct"] = 0.0;  // prefill is compute-bound: the tensor share is the meaningful one
    row["tensor_peak_pct"] = 100.0 * cost.flops / t / (o.fp8_peak_tflops * 1e12);
    log_info("prefill {} tokens: {:.3f} s, {:.1f} tok/s", n, t, n / t);
    if (o.kernel_breakdown && !result.contains("prefill_breakdown")) {
      // The last chunk of the prompt (the most context behind it), after the chunks before it.
      const int64_t begin = (n - 1) / o.prefill_chunk * o.prefill_chunk;
      state.reset_slot(0);
      for (int64_t c = 0; c < begin; c += o.prefill_chunk) {
        auto r = model_of(b).forward(prefill_batch(n, c, o.prefill_chunk, block_tokens), state);
        if (!r.is_ok()) return r.status();
      }
      json by_linear = json::object();
      DI_ASSIGN_OR_RETURN(result["prefill_breakdown"],
                          breakdown(b, state, prefill_batch(n, begin, n - begin, block_tokens), &by_linear));
      if (!by_linear.empty()) result["prefill_breakdown_by_linear"] = by_linear;
      result["prefill_breakdown_shape"] = {{"prompt", n}, {"chunk_begin", begin}, {"chunk_tokens", n - begin}};
    }
    result["rows"].push_back(row);
  }
  // The baseline is optional evidence: one that cannot be read or parsed is reported and left out
  // rather than losing the measured rows.
  if (!o.baseline_json.empty()) {
    auto text = read_file(o.baseline_json);
    const Status st = text.is_ok() ? engine::attach_baseline(result, *text) : text.status();
    if (!st.is_ok()) log_warn("bench: baseline {} not embedded: {}", o.baseline_json, st.to_string());
  }
  return result.dump(1);
}

}  // namespace deepinfer

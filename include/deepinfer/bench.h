// Public benchmark entry point behind `deepinfer bench`: decode and prefill throughput of the
// model on a device, with the share of the HBM roofline and of FP8 tensor peak, and a per-op time
// breakdown. Without a checkpoint it builds a full-width synthetic DeepSeek-V4-Flash directly in
// device memory (random weights, no files) with a configurable number of layers, so it fits one GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

struct BenchOptions {
  std::string model;                  // checkpoint dir / name; empty: synthetic V4-Flash on the device
  int64_t layers = 4;                 // synthetic model: main layers (full V4-Flash widths)
  std::string device = "cuda";
  std::string numerics = "official";
  std::vector<int32_t> batches = {1, 8, 32, 128, 512};
  std::vector<int32_t> contexts = {4096, 32768, 131072};
  std::vector<int32_t> prefill_lengths = {8192, 131072};  // lengths <= 0: no prefill row (decode only)
  int32_t prefill_chunk = 8192;
  // Decode rows: the median of `iters` steps after `warmup` steps and at least kBenchWarmSeconds
  // of them (the first shape of a run measured a few % low after 2 warm-up steps: clocks and
  // caches still settling); prefill rows: the median of iters / 2 runs after one warm-up run.
  int warmup = 2;
  int iters = 20;
  double memory_budget_gib = 120.0;   // rows whose KV would not fit are reported as skipped
  bool kernel_breakdown = true;
  // Decode rows: one more step recorded as the GPU runs it (CUPTI activity records: every kernel's
  // start and end in the replayed graph) — the idle time between kernels and its largest gaps, and
  // for the first row every launch. Needs libcupti at run time (else reported and skipped).
  bool timeline = false;
  double fp8_peak_tflops = 1979.0;    // H200 dense FP8 (datasheet)
  std::string baseline_json;          // optional rows from another engine to embed (e.g. transformers)
  std::string command;                // recorded verbatim in the JSON
  std::string commit;                 // recorded verbatim in the JSON
};

// Runs the benchmark and returns the result JSON (gpu, commit, command, date, rows, breakdown).
Result<std::string> run_benchmark(const BenchOptions& options);

// `deepinfer bench-engine`: the engine's offline throughput end to end (what vLLM's
// benchmark_throughput measures): for each concurrency c, c requests of input_len random prompt
// ids submitted at once, each generating exactly output_len tokens (ignore_eos), after a warm-up
// run of the same shapes. Rows: output and total tokens/s, time to first token, time per output
// token, and the engine's steps split into phases (EngineStats::step_times) — the host time per
// step the device waits through, next to the forward's.
struct EngineBenchOptions {
  std::string model;                  // checkpoint dir / name; empty: synthetic V4-Flash on the device
  int64_t layers = 4;                 // synthetic model: main layers (full V4-Flash widths)
  std::string device = "cuda";
  std::string numerics = "official";
  std::vector<int32_t> concurrency = {1, 8, 32, 128};
  int32_t input_len = 1024;
  int32_t output_len = 256;
  double temperature = 0.0;           // 0: greedy (either is sampled on the device)
  double top_p = 1.0;
  int32_t top_k = 0;                  // <= 0: off
  double repetition_penalty = 1.0;    // 1: off
  double frequency_penalty = 0.0;     // 0: off
  int32_t logprobs = -1;              // >= 0: raw logprobs per token (sampled on the device too)
  // Non-empty: every request is constrained by this regex (structured outputs: a grammar mask per
  // row and step). A request may then end before output_len where the grammar does (kStop); the
  // rows count the tokens generated.
  std::string regex;
  // Every step sampled on the host from the copied logits: the path of rows with bias, masks,
  // penalties or processed logprobs.
  bool host_sampling = false;
  bool async_scheduling = true;       // EngineOptions::async_scheduling (--no-async-scheduling: off)
  // Speculative decoding (EngineOptions::nextn_decode, mtp_varlen): the synthetic model then
  // carries V4-Flash's MTP block too (random weights: its drafts are almost never accepted, so the
  // rows measure the mechanism's cost, not its gain).
  int32_t nextn_decode = 0;
  bool mtp_varlen = false;
  std::string spec_verification = "rejection";  // EngineOptions::spec_verification
  int32_t max_num_batched_tokens = 8192;
  uint64_t seed = 0;
  std::string command;                // recorded verbatim in the JSON
  std::string commit;                 // recorded verbatim in the JSON
};

// Runs the engine benchmark and returns its JSON (device, commit, command, date, rows).
Result<std::string> run_engine_benchmark(const EngineBenchOptions& options);

}  // namespace deepinfer

// Sampler: input checks, the fixed per-row pipeline (order documented in sampler.h) and
// Gumbel-max selection. Each row works on its own scratch copy; nothing is shared across rows.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/status.h"
#include "sample/logits_processors.h"
#include "sample/logprobs.h"

namespace deepinfer::sample {
namespace {

// Per-thread scratch rows: a fresh 0.5 MB vector per call (V = 129,280) costs more in page
// faults and zeroing than the sampling itself. Thread-local keeps the const methods thread-safe.
std::span<float> scratch_row(int slot, size_t n) {
  thread_local std::vector<float> buffers[2];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return {buffers[slot].data(), n};
}

}  // namespace

bool penalties_active(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f;
}

Result<Sampler> Sampler::create(SamplerConfig config) {
  if (config.n_vocab <= 0) return invalid_argument("sampler n_vocab = {} must be > 0", config.n_vocab);
  for (int32_t id : config.eos_token_ids) {
    if (id < 0 || id >= config.n_vocab) {
      return invalid_argument("sampler eos token id {} is outside the vocabulary [0, {})", id,
                              config.n_vocab);
    }
  }
  return Sampler(std::move(config));
}

Status Sampler::check_row(const RowInput& row, size_t index) const {
  if (row.params == nullptr) return invalid_argument("sampler row {}: no SamplingParams", index);
  if (row.history == nullptr && penalties_active(*row.params)) {
    return invalid_argument("sampler row {}: penalties are set but no token history was given",
                            index);
  }
  const auto n_words = static_cast<size_t>(bitmask_words(config_.n_vocab));
  if (!row.token_bitmask.empty() && row.token_bitmask.size() != n_words) {
    return invalid_argument("sampler row {}: token bitmask has {} words, expected {} for {} tokens",
                            index, row.token_bitmask.size(), n_words, config_.n_vocab);
  }
  if (row.n_generated < 0) {
    return invalid_argument("sampler row {}: n_generated = {} is negative", index, row.n_generated);
  }
  return Status::ok();
}

Status Sampler::sample(const tensor::TensorView& logits, std::span<const RowInput> rows,
                       std::span<RowOutput> out) const {
  if (logits.dtype != tensor::DType::kF32 || logits.device != tensor::Device::kCpu ||
      logits.rank != 2) {
    return invalid_argument("sampler logits {} must be a rank-2 F32 CPU tensor",
                            logits.shape_string());
  }
  if (logits.shape[1] != config_.n_vocab || logits.stride[1] != 1 ||
      logits.stride[0] < config_.n_vocab) {
    return invalid_argument("sampler logits {} must have {} unit-stride columns",
                            logits.shape_string(), config_.n_vocab);
  }
  if (static_cast<size_t>(logits.shape[0]) != rows.size() || rows.size() != out.size()) {
    return invalid_argument("sampler logits {} has {} rows but {} row inputs and {} outputs",
                            logits.shape_string(), logits.shape[0], rows.size(), out.size());
  }
  for (size_t i = 0; i < rows.size(); ++i) DI_RETURN_IF_ERROR(check_row(rows[i], i));
  const auto* base = logits.as<const float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::span<const float> row(base + static_cast<int64_t>(i) * logits.stride[0],
                               static_cast<size_t>(config_.n_vocab));
    out[i] = sample_row(row, rows[i]);
  }
  return Status::ok();
}

void Sampler::preprocess(std::span<const float> logits, const RowInput& row,
                         std::span<float> processed) const {
  const SamplingParams& p = *row.params;
  std::copy(logits.begin(), logits.end(), processed.begin());
  sanitize_logits(processed);
  apply_logit_bias(processed, p.logit_bias);
  apply_allowed_token_ids(processed, p.allowed_token_ids);
  if (!row.token_bitmask.empty()) apply_token_bitmask(processed, row.token_bitmask);
  if (row.n_generated < p.min_tokens) {
    std::vector<int32_t> stop_ids = p.stop_token_ids;
    if (!p.ignore_eos) {
      stop_ids.insert(stop_ids.end(), config_.eos_token_ids.begin(), config_.eos_token_ids.end());
    }
    suppress_stop_tokens(processed, stop_ids);
  }
  if (penalties_active(p)) {
    apply_penalties(processed, *row.history, p.repetition_penalty, p.presence_penalty,
                    p.frequency_penalty);
  }
}

bool Sampler::process_row(std::span<const float> logits, const RowInput& row,
                          std::span<float> processed) const {
  const SamplingParams& p = *row.params;
  preprocess(logits, row, processed);
  if (p.is_greedy()) return max_finite(processed) != kNegInf;
  if (!apply_temperature(processed, p.temperature)) return false;
  if (p.top_k > 0) apply_top_k(processed, p.top_k);
  apply_top_p(processed, p.top_p);
  apply_min_p(processed, p.min_p);
  return true;
}

RowOutput Sampler::sample_row(std::span<const float> logits, const RowInput& row) const {
  std::span<float> z = scratch_row(0, logits.size());  // [n_vocab] processed logits
  RowOutput out;
  if (process_row(logits, row, z)) {
    out.token = row.params->is_greedy() ? argmax_lowest_id(z)
                                        : gumbel_argmax(z, row.seed, NoiseStream::kToken, row.position);
  }
  add_logprobs(logits, z, row, &out);
  return out;
}

RowOutput Sampler::output_for(std::span<const float> logits, const RowInput& row, int32_t token) const {
  RowOutput out;
  out.token = token;
  std::span<float> z;  // [n_vocab] processed logits, only when the logprobs are of them
  if (row.params->logprobs.has_value() && row.params->logprobs_mode != LogprobsMode::kRaw) {
    z = scratch_row(0, logits.size());
    process_row(logits, row, z);
  }
  add_logprobs(logits, z, row, &out);
  return out;
}

void Sampler::add_logprobs(std::span<const float> logits, std::span<const float> processed, const RowInput& row,
                           RowOutput* out) const {
  const SamplingParams& p = *row.params;
  // Logprobs only when asked for: the log-sum-exp is a pass over the row as long as the sampling.
  if (!p.logprobs.has_value()) {
    out->logprob = out->token == kNoToken ? kNegInf : 0.0f;
    return;
  }
  const int32_t n_top = *p.logprobs;
  std::span<const float> source = processed;
  if (p.logprobs_mode == LogprobsMode::kRaw) {
    std::span<float> raw = scratch_row(1, logits.size());  // [n_vocab] sanitized model logits
    std::copy(logits.begin(), logits.end(), raw.begin());
    sanitize_logits(raw);
    source = raw;
  }
  const double lse = log_sum_exp(source);
  out->logprob = out->token == kNoToken ? kNegInf : token_logprob(source, lse, out->token);
  out->rank = out->token == kNoToken ? 0 : token_rank(source, out->token);
  out->top_logprobs = top_logprobs(source, lse, n_top);
}

void Sampler::sample_rows(std::span<const float* const> logits, std::span<const RowInput> rows,
                          std::span<RowOutput> out) const {
  const auto n = static_cast<int64_t>(rows.size());
  const auto n_vocab = static_cast<size_t>(config_.n_vocab);
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] =
        sample_row(std::span<const float>(logits[static_cast<size_t>(i)], n_vocab), rows[static_cast<size_t>(i)]);
  }
}

bool Sampler::sampling_probs(std::span<const float> logits, const RowInput& row,
                             std::span<float> probs) const {
  std::span<float> z = scratch_row(0, logits.size());  // [n_vocab] processed logits
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (!process_row(logits, row, z)) return false;
  if (row.params->is_greedy()) {
    probs[argmax_lowest_id(z)] = 1.0f;
    return true;
  }
  const double lse = log_sum_exp(z);
  for (size_t i = 0; i < z.size(); ++i) {
    if (z[i] != kNegInf) probs[i] = static_cast<float>(std::exp(static_cast<double>(z[i]) - lse));
  }
  return true;
}

bool is_plain_argmax(const SamplingParams& p, int32_t n_generated, bool has_mask) {
  // Mirrors preprocess() and sample_row(): keep the two in step.
  return p.is_greedy() && !p.logprobs.has_value() && p.logit_bias.empty() && p.allowed_token_ids.empty() &&
         !has_mask && n_generated >= p.min_tokens && !penalties_active(p);
}


bool is_device_sampleable(const SamplingParams& p) {
  // Steps 1-4 are Ops::adjust_logits', 5-10 Ops::argmax_rows' / sample_rows', raw logprobs
  // Ops::logprob_rows': only the processed distribution's logprobs are the host's alone.
  return !p.logprobs.has_value() || p.logprobs_mode == LogprobsMode::kRaw;
}

int32_t gumbel_argmax(std::span<const float> z, uint64_t seed, NoiseStream stream,
                      int64_t position) {
  int32_t best = kNoToken;
  double best_score = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < z.size(); ++i) {
    if (z[i] == kNegInf) continue;  // noise only for the support: cost follows truncation
    const auto id = static_cast<int32_t>(i);
    const double score = static_cast<double>(z[i]) + gumbel_noise(seed, stream, position, id);
    if (best == kNoToken || score > best_score) best_score = score, best = id;
  }
  return best;
}

}  // namespace deepinfer::sample

// CpuOps memory, copies and elementwise ops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"
#include "sample/logits_processors.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace deepinfer::ops::cpu {

namespace {
TensorView allocate(std::vector<tensor::Buffer>* pool, DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  pool->emplace_back(static_cast<size_t>(n) * tensor::dtype_size(dtype));
  return pool->back().view(dtype, shape);
}
}  // namespace

TensorView CpuOps::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  void* p = workspace_.allocate(static_cast<size_t>(n) * tensor::dtype_size(dtype));
  return TensorView::contiguous(p, dtype, shape);
}

TensorView CpuOps::alloc_persistent(DType dtype, std::initializer_list<int64_t> shape) {
  return allocate(&persistent_, dtype, shape);
}

void CpuOps::free_persistent(const TensorView& t) {
  const auto it = std::find_if(persistent_.begin(), persistent_.end(),
                               [&](const tensor::Buffer& b) { return b.data() == t.data; });
  DI_CHECK(it != persistent_.end(), "free_persistent: {} was not allocated by alloc_persistent", t.shape_string());
  persistent_.erase(it);
}

TensorView CpuOps::upload(const void* host, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView v = alloc(dtype, shape);
  std::memcpy(v.data, host, v.nbytes());
  return v;
}

void CpuOps::copy(const TensorView& src, const TensorView& dst) {
  DI_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel(), "copy {} -> {}", src.shape_string(),
           dst.shape_string());
  DI_CHECK(src.is_contiguous() && dst.is_contiguous(), "copy needs contiguous tensors");
  std::memmove(dst.data, src.data, src.nbytes());
}

void CpuOps::fill(const TensorView& dst, float value) {
  DI_CHECK(dst.is_contiguous(), "fill needs a contiguous tensor");
  const int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::kF32: std::fill_n(dst.as<float>(), n, value); break;
    case DType::kBF16: std::fill_n(dst.as<uint16_t>(), n, tensor::f32_to_bf16(value)); break;
    case DType::kI32: std::fill_n(dst.as<int32_t>(), n, static_cast<int32_t>(value)); break;
    default: DI_CHECK(false, "fill of dtype {}", tensor::dtype_name(dst.dtype));
  }
}

void CpuOps::embed(const TensorView& ids, const TensorView& table, const TensorView& out) {
  check_activation(out, "embed");
  const int64_t T = ids.numel(), D = table.shape[1];
  DI_CHECK(out.numel() == T * D, "embed out {}", out.shape_string());
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids.as<const int32_t>()[t];
    DI_CHECK(id >= 0 && id < table.shape[0], "token id {} outside the vocabulary", id);
    read_f32(table, id * D, D, row.data());
    write_f32(out, t * D, D, row.data());
  }
}

void CpuOps::broadcast_streams(const TensorView& x, const TensorView& out) {
  const int64_t T = x.shape[0], D = x.shape[1], hc = out.shape[1];
  std::vector<float> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    read_f32(x, t * D, D, row.data());
    for (int64_t s = 0; s < hc; ++s) write_f32(out, (t * hc + s) * D, D, row.data());
  }
}

void CpuOps::rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) {
  check_activation(x, "rms_norm");
  check_activation(out, "rms_norm");
  const int64_t rows = n_rows(x), n = row_width(x);
  std::vector<float> w(static_cast<size_t>(n), 1.0f);
  if (!weight.empty()) read_f32(weight, 0, n, w.data());
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> v(static_cast<size_t>(n));
    read_f32(x, r * n, n, v.data());
    const float ms = dot(v.data(), v.data(), n) / static_cast<float>(n);
    const float inv = 1.0f / std::sqrt(ms + eps);
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv * w[i];
    write_f32(out, r * n, n, v.data());
  }
}

void CpuOps::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  DI_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add shapes");
  const int64_t n = a.numel();
  std::vector<float> va(static_cast<size_t>(n)), vb(static_cast<size_t>(n));
  read_f32(a, 0, n, va.data());
  read_f32(b, 0, n, vb.data());
  for (int64_t i = 0; i < n; ++i) va[i] += vb[i];
  write_f32(out, 0, n, va.data());
}

void CpuOps::convert(const TensorView& x, const TensorView& out) {
  DI_CHECK(x.numel() == out.numel(), "convert shapes");
  const int64_t n = x.numel();
  std::vector<float> v(static_cast<size_t>(n));
  read_f32(x, 0, n, v.data());
  write_f32(out, 0, n, v.data());
}

void CpuOps::gather_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  const int64_t n = row_width(x);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < rows.size(); ++i) {
    read_f32(x, rows[i] * n, n, v.data());
    write_f32(out, static_cast<int64_t>(i) * n, n, v.data());
  }
}

void CpuOps::scatter_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  const int64_t n = row_width(out), T = out.numel() / std::max<int64_t>(n, 1);
  DI_CHECK(x.numel() == static_cast<int64_t>(rows.size()) * n, "scatter_rows: x {} for {} rows of {}", x.shape_string(),
           rows.size(), n);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < rows.size(); ++i) {
    DI_CHECK(rows[i] >= 0 && rows[i] < T, "scatter_rows: row {} outside [0, {})", rows[i], T);
    read_f32(x, static_cast<int64_t>(i) * n, n, v.data());
    write_f32(out, rows[i] * n, n, v.data());
  }
}

void CpuOps::take_tokens(const TensorView& source, std::span<const int32_t> from, const TensorView& tokens) {
  check_take_tokens(source, from, tokens);
  const int32_t* src = source.as<const int32_t>();
  int32_t* dst = tokens.as<int32_t>();
  for (size_t t = 0; t < from.size(); ++t)
    if (from[t] >= 0 && src[from[t]] >= 0) dst[t] = src[from[t]];  // -1 (nothing sampled): the placeholder stays
}

void CpuOps::argmax_rows(const TensorView& logits, const TensorView& out) {
  check_argmax_rows(logits, out);
  const float* base = logits.as<const float>();
  int32_t* ids = out.as<int32_t>();
  for (int64_t r = 0; r < logits.shape[0]; ++r) {
    const float* row = base + r * logits.stride[0];
    int32_t best = -1;
    float best_v = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < logits.shape[1]; ++i) {
      float v = row[i];
      if (v == std::numeric_limits<float>::infinity()) v = std::numeric_limits<float>::max();
      // Strict '>' scanning ids upwards: the lowest id among equal maxima; NaN and -inf never win.
      if (v > best_v) best_v = v, best = static_cast<int32_t>(i);
    }
    ids[r] = best;
  }
}

void CpuOps::sample_rows(const TensorView& logits, std::span<const SampleRow> rows, const TensorView& out) {
  check_sample_rows(logits, rows, out);
  argmax_rows(logits, out);  // the greedy rows' tokens, and every row's maximum (at its id)
  const float* base = logits.as<const float>();
  int32_t* ids = out.as<int32_t>();
  const auto V = static_cast<size_t>(logits.shape[1]);
  std::vector<float> z(V);  // [V] the processed row
  for (int64_t r = 0; r < logits.shape[0]; ++r) {
    const SampleRow& p = rows[static_cast<size_t>(r)];
    if (p.temperature == 0.0f || ids[r] < 0) continue;  // greedy, or nothing finite (-1)
    // The host sampler's steps 0 and 6-10 (sample/logits_processors.h), on the row as given.
    std::copy(base + r * logits.stride[0], base + r * logits.stride[0] + V, z.begin());
    sample::sanitize_logits(z);
    sample::apply_temperature(z, p.temperature);
    if (p.top_k > 0) sample::apply_top_k(z, p.top_k);
    sample::apply_top_p(z, p.top_p);
    sample::apply_min_p(z, p.min_p);
    ids[r] = sample::gumbel_argmax(z, p.seed, sample::NoiseStream::kToken, p.position);
  }
}

void CpuOps::adjust_logits(const TensorView& logits, std::span<const AdjustRow> rows,
                           std::span<const AdjustEntry> entries, std::span<const int32_t> stops,
                           std::span<const uint32_t> masks, const TensorView& pending_ids, const TensorView& out) {
  check_adjust_logits(logits, rows, entries, stops, masks, pending_ids, out);
  const auto V = static_cast<size_t>(logits.shape[1]);
  const auto words = static_cast<size_t>(sample::bitmask_words(logits.shape[1]));
  std::vector<AdjustEntry> merged;  // a row's entries with its pending token counted
  for (size_t r = 0; r < rows.size(); ++r) {
    const AdjustRow& a = rows[r];
    const float* in = logits.as<const float>() + static_cast<int64_t>(r) * logits.stride[0];
    std::span<float> z(out.as<float>() + r * V, V);  // [V] the row through the host sampler's steps 0-4
    std::copy(in, in + V, z.begin());
    sample::sanitize_logits(z);
    std::span<const AdjustEntry> row_entries = entries.subspan(a.entry_begin, a.entry_end - a.entry_begin);
    const int32_t pending = a.pending >= 0 ? pending_ids.as<const int32_t>()[a.pending] : -1;
    if (pending >= 0 && static_cast<size_t>(pending) < V) {
      merged.assign(row_entries.begin(), row_entries.end());
      auto it = std::find_if(merged.begin(), merged.end(), [&](const AdjustEntry& e) { return e.token == pending; });
      if (it == merged.end()) it = merged.insert(merged.end(), AdjustEntry{pending, 0.0f, 0, 0});
      it->output_count += 1;
      it->seen = 1;
      row_entries = merged;
    }
    for (const AdjustEntry& e : row_entries) z[e.token] += e.bias;  // step 1 (masks commute with it)
    if (a.mask_row >= 0) sample::apply_token_bitmask(z, masks.subspan(a.mask_row * words, words));  // step 2
    if (a.stop_end > a.stop_begin) sample::suppress_stop_tokens(z, stops.subspan(a.stop_begin, a.stop_end - a.stop_begin));
    // Step 4 in sample::apply_penalties' order and arithmetic: repetition, then frequency, presence.
    if (a.repetition != 1.0f) {
      for (const AdjustEntry& e : row_entries) {
        if (e.seen == 0) continue;
        float& v = z[e.token];
        v = v > 0.0f ? v / a.repetition : v * a.repetition;
      }
    }
    if (a.presence != 0.0f || a.frequency != 0.0f) {
      for (const AdjustEntry& e : row_entries) {
        if (e.output_count <= 0) continue;
        float& v = z[e.token];
        v -= a.frequency * static_cast<float>(e.output_count);
        v -= a.presence;
      }
    }
  }
}

void CpuOps::logprob_rows(const TensorView& logits, const TensorView& tokens, const TensorView& logprob,
                          const TensorView& top_ids, const TensorView& top_logprobs) {
  check_logprob_rows(logits, tokens, logprob, top_ids, top_logprobs);
  const float* base = logits.as<const float>();
  const auto V = static_cast<size_t>(logits.shape[1]);
  const auto n = static_cast<int32_t>(top_ids.shape[1]);
  std::vector<float> raw(V);  // [V] the sanitised row
  for (int64_t r = 0; r < logits.shape[0]; ++r) {
    std::copy(base + r * logits.stride[0], base + r * logits.stride[0] + V, raw.begin());
    sample::sanitize_logits(raw);
    // The host sampler's raw-mode logprobs (Sampler::sample_row), -1 / -inf past a short row.
    const int32_t token = tokens.as<const int32_t>()[r];
    const double lse = sample::log_sum_exp(raw);
    logprob.as<float>()[r] = token < 0 ? sample::kNegInf : sample::token_logprob(raw, lse, token);
    const std::vector<TokenLogprob> top = sample::top_logprobs(raw, lse, std::min<int32_t>(n, static_cast<int32_t>(V)));
    for (int32_t j = 0; j < n; ++j) {
      const bool have = static_cast<size_t>(j) < top.size();
      top_ids.as<int32_t>()[r * n + j] = have ? top[static_cast<size_t>(j)].token : -1;
      top_logprobs.as<float>()[r * n + j] = have ? top[static_cast<size_t>(j)].logprob : sample::kNegInf;
    }
  }
}

void CpuOps::token_rank_rows(const TensorView& logits, const TensorView& tokens, const TensorView& rank) {
  check_token_rank_rows(logits, tokens, rank);
  const float* base = logits.as<const float>();
  const auto V = static_cast<size_t>(logits.shape[1]);
  std::vector<float> raw(V);  // [V] the sanitised row
  for (int64_t r = 0; r < logits.shape[0]; ++r) {
    const int32_t token = tokens.as<const int32_t>()[r];
    if (token < 0) {
      rank.as<int32_t>()[r] = 0;
      continue;
    }
    std::copy(base + r * logits.stride[0], base + r * logits.stride[0] + V, raw.begin());
    sample::sanitize_logits(raw);
    rank.as<int32_t>()[r] = sample::token_rank(raw, token);
  }
}

void CpuOps::swiglu(const TensorView& g, const TensorView& u, float limit, const TensorView& out) {
  const int64_t n = g.numel();
  std::vector<float> vg(static_cast<size_t>(n)), vu(static_cast<size_t>(n));
  read_f32(g, 0, n, vg.data());
  read_f32(u, 0, n, vu.data());
  for (int64_t i = 0; i < n; ++i) {
    float gi = vg[i], ui = vu[i];
    if (limit > 0) {
      gi = std::min(gi, limit);  // asymmetric clamp: gate from above only
      ui = std::clamp(ui, -limit, limit);
    }
    vg[i] = gi / (1.0f + std::exp(-gi)) * ui;
  }
  write_f32(out, 0, n, vg.data());
}

}  // namespace deepinfer::ops::cpu

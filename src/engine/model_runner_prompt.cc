// ModelRunner's prompt logprobs (see model_runner.h): the logit rows of prompt chunks whose next
// token is a prompt token, and their reduction where the logits are. Why reduce at once: a row is
// [vocab] F32 (505 KiB on V4), a long prompt's would not fit a step's workspace; reduced, it is
// (2 + 2 n_top) numbers, copied back like the sampled ids (one copy per step, no wait).
#include <algorithm>
#include <cstring>

#include "base/status.h"
#include "engine/model_runner.h"

namespace deepinfer::engine {

void ModelRunner::add_prompt_logit_rows(const sched::BatchPlan& plan, model::ForwardBatch& b) {
  prompt_rows_.clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const sched::SeqPlan& sp = plan.seqs[i];
    if (sp.n_prompt_logit_rows <= 0) continue;
    prompt_rows_.push_back(PromptLogitRows{i, sp.first_position, sp.n_prompt_logit_rows,
                                           static_cast<int32_t>(b.logit_rows.size())});
    for (int32_t j = 0; j < sp.n_prompt_logit_rows; ++j) b.logit_rows.push_back(token_begin_[i] + j);
  }
}

Status ModelRunner::launch_prompt_logprobs(const tensor::TensorView& logits, int64_t first_row,
                                           std::span<const int32_t> tokens, int32_t n_top, PromptTicket* ticket) {
  const auto rows = static_cast<int64_t>(tokens.size());
  const int64_t n = n_top;
  *ticket = PromptTicket{0, rows, n, next_prompt_buffer_};
  if (rows == 0) return Status::ok();
  if (n < 0 || n > ops::Ops::kMaxLogprobTop) return internal_error("prompt logprobs: {} top entries per row", n);
  if (logits.rank != 2 || first_row < 0 || first_row + rows > logits.shape[0]) {
    return internal_error("prompt logprobs: rows [{}, {}) of logits {}", first_row, first_row + rows,
                          logits.shape_string());
  }
  ops::Ops& ops = *model_->ops;
  const tensor::TensorView in = logits.slice0(first_row, first_row + rows);                          // [rows, V] F32
  const tensor::TensorView d_tokens = ops.upload(tokens.data(), tensor::DType::kI32, {rows});  // [rows]
  // [logprob | rank | top_ids | top_logprobs] in one I32 buffer (F32 as its bits): one copy back.
  const int64_t width = 2 + 2 * n;
  ensure_room(prompt_dev_, rows * width, [&](int64_t k) { return ops.alloc_persistent(tensor::DType::kI32, {k}); });
  auto part = [&](tensor::DType dtype, int64_t at, std::initializer_list<int64_t> shape) {
    return tensor::TensorView::contiguous(static_cast<int32_t*>(prompt_dev_.data) + at * rows, dtype, shape,
                                          prompt_dev_.device);
  };
  ops.logprob_rows(in, d_tokens, part(tensor::DType::kF32, 0, {rows}), part(tensor::DType::kI32, 2, {rows, n}),
                   part(tensor::DType::kF32, 2 + n, {rows, n}));
  ops.token_rank_rows(in, d_tokens, part(tensor::DType::kI32, 1, {rows}));
  tensor::TensorView& host = prompt_host_[ticket->buffer];  // [width x rows]
  ensure_room(host, rows * width, [&](int64_t k) { return ops.alloc_host(tensor::DType::kI32, {k}); });
  ticket->copy = ops.copy_to_host_async(
      tensor::TensorView::contiguous(prompt_dev_.data, tensor::DType::kI32, {rows * width}, prompt_dev_.device),
      tensor::TensorView::contiguous(host.data, tensor::DType::kI32, {rows * width}, host.device));
  next_prompt_buffer_ ^= 1;
  return Status::ok();
}

Status ModelRunner::collect_prompt_logprobs(const PromptTicket& ticket, PromptReduced* out) {
  const auto R = static_cast<size_t>(ticket.rows), n = static_cast<size_t>(ticket.n_top);
  out->n_top = ticket.n_top;
  out->logprob.resize(R);
  out->rank.resize(R);
  out->top_ids.resize(R * n);
  out->top_logprobs.resize(R * n);
  if (R == 0) return Status::ok();
  model_->ops->wait_host_copy(ticket.copy);
  const int32_t* host = prompt_host_[ticket.buffer].as<const int32_t>();
  std::memcpy(out->logprob.data(), host, R * sizeof(float));
  std::copy_n(host + R, R, out->rank.begin());
  std::copy_n(host + 2 * R, R * n, out->top_ids.begin());
  std::memcpy(out->top_logprobs.data(), host + (2 + n) * R, R * n * sizeof(float));
  return Status::ok();
}

}  // namespace deepinfer::engine

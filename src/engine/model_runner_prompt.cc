// ModelRunner's prompt logprobs (see model_runner.h): the logit rows of prompt chunks whose next
// token is a prompt token, and their reduction where the logits are. Why reduce at once: a row is
// [vocab] F32 (505 KiB on V4), a long prompt's would not fit a step's workspace; reduced, it is
// (2 + 2 n_top) numbers, copied back like the sampled ids (one copy per step, no wait).
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
  // One logprob block (one I32 buffer, F32 as its bits): one copy back.
  const int64_t width = 2 + 2 * n;
  ensure_room(prompt_dev_, rows * width, [&](int64_t k) { return ops.alloc_persistent(tensor::DType::kI32, {k}); });
  queue_logprob_block(in, d_tokens, static_cast<int32_t*>(prompt_dev_.data), n, prompt_dev_.device);
  ticket->copy = copy_back(prompt_dev_, rows * width, prompt_host_[ticket->buffer]);
  next_prompt_buffer_ ^= 1;
  return Status::ok();
}

Status ModelRunner::collect_prompt_logprobs(const PromptTicket& ticket, PromptReduced* out) {
  out->n_top = ticket.n_top;
  if (ticket.rows > 0) model_->ops->wait_host_copy(ticket.copy);
  const int32_t* host = ticket.rows > 0 ? prompt_host_[ticket.buffer].as<const int32_t>() : nullptr;
  read_logprob_block(host, ticket.rows, ticket.n_top, &out->logprob, &out->rank, &out->top_ids, &out->top_logprobs);
  return Status::ok();
}

}  // namespace deepinfer::engine

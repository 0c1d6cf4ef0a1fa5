// The engine's side of prompt logprobs (SamplingParams::prompt_logprobs; engine_impl.h): which
// token each prompt row is asked about, and where the reduced rows go. The rows themselves are the
// runner's (ModelRunner::prompt_logit_rows, reduced by launch_prompt_logprobs).
#include <algorithm>

#include "engine/engine_impl.h"

namespace deepinfer::engine {

Status EngineImpl::queue_prompt_logprobs(const sched::BatchPlan& plan, Launched* l) {
  l->prompt_rows.clear();
  l->prompt_ticket = {};
  const std::vector<ModelRunner::PromptLogitRows>& spans = runner_->prompt_logit_rows();
  if (spans.empty()) return Status::ok();
  std::vector<int32_t> tokens;  // [rows] the prompt token after each row (-1: its sequence ended)
  int32_t n_top = 0;            // the step's longest top list; each sequence keeps its own prefix
  for (const ModelRunner::PromptLogitRows& r : spans) {
    const kv::SeqId seq = plan.seqs.at(r.plan_row).seq_id;
    const SequenceState* s = outputs_->find(seq);
    const PromptLogprobs* p = s != nullptr ? s->prompt_logprobs.get() : nullptr;
    for (int32_t j = 0; j < r.n; ++j) tokens.push_back(p != nullptr ? p->next_token(r.first_position + j) : -1);
    if (p != nullptr) n_top = std::max(n_top, p->n_top());
    l->prompt_rows.push_back(Launched::PromptRows{seq, r.first_position, r.n});
  }
  const int64_t n_sampled = runner_->n_sampled_rows();
  DI_RETURN_IF_ERROR(runner_->launch_prompt_logprobs(l->result.logits, n_sampled, tokens, n_top, &l->prompt_ticket));
  l->result.logits = l->result.logits.slice0(0, n_sampled);  // [n_sampled, V]: what the sampling reads
  return Status::ok();
}

Status EngineImpl::take_prompt_logprobs(const Launched& l) {
  if (l.prompt_rows.empty()) return Status::ok();
  ModelRunner::PromptReduced r;
  DI_RETURN_IF_ERROR(runner_->collect_prompt_logprobs(l.prompt_ticket, &r));
  const auto n = static_cast<size_t>(r.n_top);
  size_t row = 0;
  for (const Launched::PromptRows& span : l.prompt_rows) {
    SequenceState* s = outputs_->find(span.seq);
    for (int32_t j = 0; j < span.n; ++j, ++row) {
      if (s == nullptr || !s->prompt_logprobs) continue;  // ended while the step ran
      s->prompt_logprobs->record(span.first_position + j, r.logprob[row], r.rank[row],
                                 std::span<const int32_t>(r.top_ids).subspan(row * n, n),
                                 std::span<const float>(r.top_logprobs).subspan(row * n, n));
    }
  }
  return Status::ok();
}

}  // namespace deepinfer::engine

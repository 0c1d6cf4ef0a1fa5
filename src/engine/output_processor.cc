// OutputProcessor (see output_processor.h). The order inside accept_token follows the contract
// of docs/sampling.md: the grammar sees every sampled token (it produced the mask), the penalty
// history every generated token, and the stop checker decides the finish and the releasable text.
#include "engine/output_processor.h"

#include <algorithm>

#include "base/status.h"
#include "sample/logits_processors.h"

namespace deepinfer::engine {

SequenceState::SequenceState(RequestId request, int32_t index, std::shared_ptr<const SamplingParams> p,
                             uint64_t seed_value, std::span<const int32_t> prompt,
                             std::shared_ptr<const Tokenizer> tokenizer, std::span<const int32_t> eos_ids,
                             int32_t max_tokens_cap)
    : request_id(request),
      sample_index(index),
      params(std::move(p)),
      seed(seed_value),
      n_prompt(static_cast<int32_t>(prompt.size())),
      history(prompt),
      stop(*params, eos_ids, max_tokens_cap),
      detokenizer(std::move(tokenizer), params->skip_special_tokens) {}

OutputProcessor::OutputProcessor(std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> eos_ids,
                                 int32_t n_vocab)
    : tokenizer_(std::move(tokenizer)), eos_ids_(std::move(eos_ids)), n_vocab_(n_vocab) {}

SequenceState& OutputProcessor::add(kv::SeqId seq, SequenceState state) {
  return seqs_.insert_or_assign(seq, std::move(state)).first->second;
}

SequenceState* OutputProcessor::find(kv::SeqId seq) {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

Result<sample::RowInput> OutputProcessor::row_input(SequenceState& s, int64_t position) {
  sample::RowInput row;
  row.params = s.params.get();
  row.history = &s.history;
  row.n_generated = s.n_generated;
  row.position = position;
  row.seed = s.seed;
  if (s.matcher) {
    s.bitmask.assign(static_cast<size_t>(sample::bitmask_words(n_vocab_)), 0u);
    if (Status st = s.matcher->fill_bitmask(s.bitmask); !st.is_ok()) return st.with_context("structured_output");
    row.token_bitmask = s.bitmask;
  }
  return row;
}

Result<sched::FinishReason> OutputProcessor::accept_token(SequenceState& s, const sample::RowOutput& row) {
  const int32_t token = row.token;
  if (s.n_generated == 0 && s.prompt_logprobs && !s.prompt_logprobs->ready()) {
    return internal_error("prompt_logprobs: the first token was sampled before every prompt row was reduced");
  }
  if (s.matcher && !s.matcher->accept(token)) {
    return internal_error("structured_output: the grammar rejected sampled token {}", token);
  }
  s.history.append(token);
  if (s.n_generated == 0 && s.prompt_logprobs) s.pending.prompt_logprobs = s.prompt_logprobs->take();
  ++s.n_generated;
  s.pending.token_ids.push_back(token);
  if (s.params->logprobs.has_value()) s.pending.logprobs.push_back(TokenLogprobs{token, row.logprob, row.top_logprobs, row.rank});
  sample::StopUpdate update = s.stop.append(token, s.detokenizer.push(token));
  s.pending.text += update.text;
  if (update.finish == sample::FinishReason::kNone && s.matcher && s.matcher->is_terminated()) {
    // The grammar accepted EOS (also when ignore_eos hides it from the stop checker): done.
    s.pending.text += s.stop.flush();
    update.finish = sample::FinishReason::kStop;
  }
  switch (update.finish) {
    case sample::FinishReason::kNone: return sched::FinishReason::kNone;
    case sample::FinishReason::kStop:
      if (update.stop_string_index < 0) s.pending.text += s.detokenizer.flush();
      record_stop_reason(s, update);
      return sched::FinishReason::kStop;
    case sample::FinishReason::kLength:
      s.pending.text += s.detokenizer.flush();
      return sched::FinishReason::kLength;
  }
  return sched::FinishReason::kNone;
}

// vLLM's stop_reason: the matched stop string, or a stop_token_ids id — but EOS (not ignored)
// reports none, even when it is listed in stop_token_ids too.
void OutputProcessor::record_stop_reason(SequenceState& s, const sample::StopUpdate& update) const {
  const SamplingParams& p = *s.params;
  if (update.stop_string_index >= 0 && static_cast<size_t>(update.stop_string_index) < p.stop.size()) {
    s.pending.stop_string = p.stop[static_cast<size_t>(update.stop_string_index)];
    return;
  }
  const int32_t t = update.stop_token;
  if (t < 0) return;
  const bool eos = !p.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), t) != eos_ids_.end();
  if (!eos && std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) != p.stop_token_ids.end()) {
    s.pending.stop_token_id = t;
  }
}

void OutputProcessor::stamp(SequenceState& s, TokenEvent* e) const {
  e->request_id = s.request_id;
  e->sample_index = s.sample_index;
  e->n_prompt_tokens = s.n_prompt;
  e->n_cached_tokens = s.n_cached_tokens;
  e->n_generated_tokens = s.n_generated;
  s.first_event_sent = true;
}

TokenEvent OutputProcessor::take_event(SequenceState& s, const sched::SeqEvent& event) {
  TokenEvent e = std::move(s.pending);
  s.pending = TokenEvent{};
  if (!s.first_event_sent) s.n_cached_tokens = event.n_prompt_cached;
  if (event.finish != sched::FinishReason::kNone) {
    if (!s.stop.finished()) e.text += s.stop.flush() + s.detokenizer.flush();  // the scheduler's own cap
    e.finish = event.finish == sched::FinishReason::kStop ? FinishReason::kStop : FinishReason::kLength;
  }
  stamp(s, &e);
  return e;
}

TokenEvent OutputProcessor::final_event(SequenceState& s, FinishReason reason, std::string message) {
  TokenEvent e;  // tokens sampled in a step that then failed are not reported
  s.pending = TokenEvent{};
  if (reason == FinishReason::kAbort && !s.stop.finished()) e.text = s.stop.flush() + s.detokenizer.flush();
  e.finish = reason;
  e.error = std::move(message);
  stamp(s, &e);
  return e;
}

}  // namespace deepinfer::engine

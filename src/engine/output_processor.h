// OutputProcessor: the per-sequence output side of the engine — the sampler's row inputs (seed,
// penalty history, grammar bitmask), and after sampling: detokenization, stop checks (stop
// tokens, stop strings with hold-back, min/max tokens), logprobs and the TokenEvents sent to the
// caller. One SequenceState per scheduler sequence; the engine thread is the only user.
// Invariant: the text of all events of a sequence concatenates to its final text, never retracted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/prompt_logprobs.h"
#include "engine/structured_output.h"
#include "kv/types.h"
#include "sample/sampler.h"
#include "sample/spec_verify.h"
#include "sample/stop_checker.h"
#include "sample/token_history.h"
#include "sched/batch_plan.h"

namespace deepinfer::engine {

struct SequenceState {
  SequenceState(RequestId request, int32_t index, std::shared_ptr<const SamplingParams> params, uint64_t seed,
                std::span<const int32_t> prompt, std::shared_ptr<const Tokenizer> tokenizer,
                std::span<const int32_t> eos_ids, int32_t max_tokens_cap);

  RequestId request_id = 0;
  int32_t sample_index = 0;
  std::shared_ptr<const SamplingParams> params;
  uint64_t seed = 0;
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int32_t n_cached_tokens = 0;
  sample::TokenHistory history;
  sample::StopChecker stop;
  IncrementalDetokenizer detokenizer;
  std::unique_ptr<StructuredOutputMatcher> matcher;
  sample::DraftLaw draft_law;  // the pending drafts' distributions (rejection sampling, sampled rows)
  // sampling.prompt_logprobs, on the request's sample 0 only (null otherwise): filled as the prompt
  // runs, handed to the event of the first token.
  std::unique_ptr<PromptLogprobs> prompt_logprobs;
  std::vector<uint32_t> bitmask;  // filled before each sample when matcher is set
  TokenEvent pending;             // tokens sampled this step, emitted after the scheduler's update
  bool first_event_sent = false;
};

class OutputProcessor {
 public:
  OutputProcessor(std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> eos_ids, int32_t n_vocab);

  SequenceState& add(kv::SeqId seq, SequenceState state);
  SequenceState* find(kv::SeqId seq);
  void erase(kv::SeqId seq) { seqs_.erase(seq); }
  size_t size() const { return seqs_.size(); }

  // The sampler's input for the token that will occupy `position`. Errors when the grammar
  // cannot produce a mask (the engine fails the sequence).
  Result<sample::RowInput> row_input(SequenceState& s, int64_t position);
  // Records a sampled token: grammar advance, penalty history, detokenization, stop checks and
  // logprobs go into s.pending (with the first token, the prompt logprobs too: every prompt row
  // ran before the step that samples it). Returns the finish the scheduler should apply (kNone, kStop,
  // kLength) or an error (grammar rejected the token).
  Result<sched::FinishReason> accept_token(SequenceState& s, const sample::RowOutput& row);
  // The event for the scheduler's SeqEvent of this sequence (takes s.pending).
  TokenEvent take_event(SequenceState& s, const sched::SeqEvent& event);
  // A final event ending the sequence outside update(): abort, or an error with `message`.
  TokenEvent final_event(SequenceState& s, FinishReason reason, std::string message);

  int32_t n_vocab() const { return n_vocab_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 private:
  void stamp(SequenceState& s, TokenEvent* event) const;

  std::shared_ptr<const Tokenizer> tokenizer_;
  void record_stop_reason(SequenceState& s, const sample::StopUpdate& update) const;
  std::vector<int32_t> eos_ids_;
  int32_t n_vocab_;
  std::unordered_map<kv::SeqId, SequenceState> seqs_;
};

}  // namespace deepinfer::engine

// StopChecker: per-sequence end-of-generation logic over the token stream and the detokenized
// text stream: stop token ids, EOS (unless ignore_eos), min_tokens, max_tokens, and stop STRINGS
// with hold-back. Text that could still grow into a stop string (or is an incomplete UTF-8
// sequence) is held back until disambiguated, so released text never has to be retracted.
// Invariant: the concatenation of released text is the same whatever the token boundaries are.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/sampling.h"

namespace deepinfer::sample {

enum class FinishReason : uint8_t {
  kNone,    // still running
  kStop,    // a stop token, EOS or stop string
  kLength,  // max_tokens (or the engine's cap) reached
};

struct StopUpdate {
  std::string text;  // text that may be streamed now (possibly empty)
  FinishReason finish = FinishReason::kNone;
  int32_t stop_token = -1;         // the EOS / stop_token_ids id that ended it, else -1
  int32_t stop_string_index = -1;  // index into SamplingParams::stop that matched, else -1
};

class StopChecker {
 public:
  // max_tokens_cap is the engine's own limit (e.g. room left in the context window); the
  // effective limit is min(params.max_tokens, max_tokens_cap). The checker copies what it needs.
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
              int32_t max_tokens_cap);

  // Feeds one generated token and the text the detokenizer produced for it (UTF-8 deltas; a
  // delta may end inside a character). Must not be called once finished().
  // Rules, in order: (1) a stop token (EOS unless ignore_eos, or stop_token_ids) ends the
  // sequence at any count (the sampler already keeps them out until min_tokens; one can still
  // appear when nothing else is allowed); its text is dropped unless include_stop_str_in_output.
  // (2) once more than min_tokens tokens exist, the stop string that completes first (earliest
  // end; ties: longest, then lowest index) ends it; the text from its start is dropped (from its
  // end if include_stop_str_in_output). (3) the max_tokens-th token ends it with kLength.
  // On any finish all remaining text is released.
  StopUpdate append(int32_t token, std::string_view text_delta);

  // Releases held-back text, e.g. when the engine ends the sequence for another reason.
  std::string flush();

  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  int32_t n_generated() const { return n_generated_; }
  // Bytes currently held back.
  size_t n_held() const { return pending_.size(); }

 private:
  bool is_stop_token(int32_t token) const;
  // Earliest-completing stop string in pending_: {start, index} or {npos, -1}.
  std::pair<size_t, int32_t> find_stop_string() const;
  // Bytes at the end of pending_ that must wait for more text.
  size_t hold_back_length() const;

  std::vector<int32_t> stop_token_ids_;  // includes EOS unless ignore_eos
  std::vector<std::string> stop_strings_;
  int32_t min_tokens_ = 0;
  int32_t max_tokens_ = 0;
  bool include_stop_ = false;

  int32_t n_generated_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  std::string pending_;  // text received but not yet released
};

// Bytes at the end of `text` that form an incomplete UTF-8 sequence (0..3).
size_t incomplete_utf8_suffix(std::string_view text);

}  // namespace deepinfer::sample

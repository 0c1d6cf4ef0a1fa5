// JSONL input and output of `deepinfer generate`. Input: one JSON object per line with "prompt"
// (text) or "prompt_token_ids" / "prompt_ids" (ids), optional "id" (echoed back) and optional
// per-line sampling overrides with vLLM's names (max_tokens, temperature, top_p, top_k, min_p,
// seed, n, stop, stop_token_ids, ignore_eos, logprobs, repetition_penalty, presence_penalty,
// frequency_penalty, min_tokens); a line that is a bare JSON string is a text prompt.
// Output: one object per prompt (see docs/engine.md for the schema).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::cli {

struct PromptItem {
  Request request;
  nlohmann::json id;       // null unless the input line had "id"
  std::string display;     // the prompt as shown to the user (text, or ids joined by spaces)
};

// Parses a JSONL file; `defaults` are the command-line sampling options. Errors name the line.
Result<std::vector<PromptItem>> read_prompts_jsonl(const std::string& path, const SamplingParams& defaults);

// The output record of one prompt.
nlohmann::json output_record(size_t index, const PromptItem& item, const GenerateOutput& out);

}  // namespace deepinfer::cli

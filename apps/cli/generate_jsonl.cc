// JSONL prompts in, JSONL results out for `deepinfer generate` (see generate_jsonl.h).
#include "generate_jsonl.h"

#include <cmath>
#include <fstream>

namespace deepinfer::cli {
namespace {

using nlohmann::json;

Status bad_line(size_t line_no, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "prompts line " + std::to_string(line_no) + ": " + what);
}

// Applies vLLM-named sampling overrides present in `j`.
void apply_overrides(const json& j, SamplingParams* p) {
  auto get = [&](const char* key, auto* field) {
    if (j.contains(key) && !j[key].is_null()) *field = j[key].get<std::remove_pointer_t<decltype(field)>>();
  };
  get("temperature", &p->temperature);
  get("top_p", &p->top_p);
  get("top_k", &p->top_k);
  get("min_p", &p->min_p);
  get("n", &p->n);
  get("stop", &p->stop);
  get("stop_token_ids", &p->stop_token_ids);
  get("ignore_eos", &p->ignore_eos);
  get("min_tokens", &p->min_tokens);
  get("repetition_penalty", &p->repetition_penalty);
  get("presence_penalty", &p->presence_penalty);
  get("frequency_penalty", &p->frequency_penalty);
  if (j.contains("max_tokens") && !j["max_tokens"].is_null()) p->max_tokens = j["max_tokens"].get<int32_t>();
  if (j.contains("seed") && !j["seed"].is_null()) p->seed = j["seed"].get<uint64_t>();
  if (j.contains("logprobs") && !j["logprobs"].is_null()) p->logprobs = j["logprobs"].get<int32_t>();
  if (j.contains("prompt_logprobs") && !j["prompt_logprobs"].is_null()) {
    p->prompt_logprobs = j["prompt_logprobs"].get<int32_t>();
  }
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

Result<PromptItem> parse_line(const std::string& line, size_t line_no, const SamplingParams& defaults) {
  PromptItem item;
  item.request.sampling = defaults;
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return bad_line(line_no, std::string("invalid JSON: ") + e.what());
  }
  if (j.is_string()) {
    item.request.prompt = item.display = j.get<std::string>();
    return item;
  }
  if (!j.is_object()) return bad_line(line_no, "expected an object or a string");
  try {
    if (j.contains("prompt")) item.request.prompt = item.display = j["prompt"].get<std::string>();
    for (const char* key : {"prompt_token_ids", "prompt_ids"}) {
      if (j.contains(key)) item.request.prompt_ids = j[key].get<std::vector<int32_t>>();
    }
    if (!item.request.prompt_ids.empty()) item.display = join_ids(item.request.prompt_ids);
    if (j.contains("id")) item.id = j["id"];
    apply_overrides(j, &item.request.sampling);
  } catch (const json::exception& e) {
    return bad_line(line_no, std::string("wrong field type: ") + e.what());
  }
  return item;
}

json logprobs_json(const std::vector<TokenLogprobs>& lps) {
  json arr = json::array();
  for (const TokenLogprobs& t : lps) {
    json top = json::array();
    for (const TokenLogprob& e : t.top) {
      top.push_back({{"token", e.token}, {"logprob", std::isfinite(e.logprob) ? json(e.logprob) : json(nullptr)}});
    }
    arr.push_back({{"token", t.token}, {"logprob", t.logprob}, {"rank", t.rank}, {"top_logprobs", top}});
  }
  return arr;
}

}  // namespace

Result<std::vector<PromptItem>> read_prompts_jsonl(const std::string& path, const SamplingParams& defaults) {
  std::ifstream in(path);
  if (!in) return Status(StatusCode::kNotFound, "cannot open prompts file " + path);
  std::vector<PromptItem> items;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto item = parse_line(line, line_no, defaults);
    if (!item.is_ok()) return item.status();
    items.push_back(std::move(item).value());
  }
  if (items.empty()) return Status(StatusCode::kInvalidArgument, "prompts file " + path + " has no prompts");
  return items;
}

json output_record(size_t index, const PromptItem& item, const GenerateOutput& out) {
  json outputs = json::array();
  int64_t n_completion = 0;
  for (size_t i = 0; i < out.sequences.size(); ++i) {
    const GenerateOutput::Sequence& s = out.sequences[i];
    json o = {{"index", i}, {"text", s.text}, {"token_ids", s.token_ids},
              {"finish_reason", finish_reason_name(s.finish)}};
    if (!s.error.empty()) o["error"] = s.error;
    if (item.request.sampling.logprobs.has_value()) {
      double cumulative = 0.0;
      for (const TokenLogprobs& t : s.logprobs) cumulative += t.logprob;
      o["cumulative_logprob"] = cumulative;
      o["logprobs"] = logprobs_json(s.logprobs);
    }
    n_completion += static_cast<int64_t>(s.token_ids.size());
    outputs.push_back(std::move(o));
  }
  json r = {{"index", index}};
  if (!item.id.is_null()) r["id"] = item.id;
  r["prompt"] = item.request.prompt.empty() ? json(nullptr) : json(item.request.prompt);
  r["prompt_token_ids"] = out.prompt_ids;
  if (item.request.sampling.prompt_logprobs.has_value()) {
    // vLLM's shape: nothing predicts the first prompt token.
    json prompt = logprobs_json(out.prompt_logprobs);
    if (!out.prompt_ids.empty()) prompt.insert(prompt.begin(), nullptr);
    r["prompt_logprobs"] = std::move(prompt);
  }
  if (!outputs.empty()) {
    r["text"] = outputs[0]["text"];
    r["token_ids"] = outputs[0]["token_ids"];
    r["finish_reason"] = outputs[0]["finish_reason"];
  }
  r["outputs"] = std::move(outputs);
  r["usage"] = {{"prompt_tokens", out.prompt_ids.size()},
                {"completion_tokens", n_completion},
                {"total_tokens", static_cast<int64_t>(out.prompt_ids.size()) + n_completion},
                {"cached_tokens", out.n_cached_tokens}};
  return r;
}

}  // namespace deepinfer::cli

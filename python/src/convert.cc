// Python ↔ public API conversions (see convert.h).
#include "convert.h"

#include <pybind11/stl.h>

#include <set>

namespace deepinfer::python {
namespace {

[[noreturn]] void value_error(const std::string& message) {
  throw py::value_error(message);
}

template <typename T>
void take(py::dict& d, const char* key, T* field) {
  if (!d.contains(key)) return;
  py::object v = d[key];
  d.attr("pop")(key);
  if (v.is_none()) return;
  try {
    *field = v.cast<T>();
  } catch (const py::cast_error&) {
    value_error(std::string(key) + ": wrong type (" + std::string(py::str(py::type::of(v).attr("__name__"))) + ")");
  }
}

template <typename T>
void take_optional(py::dict& d, const char* key, std::optional<T>* field) {
  T value{};
  if (!d.contains(key) || d[key].is_none()) {
    if (d.contains(key)) d.attr("pop")(key);
    return;
  }
  take(d, key, &value);
  *field = value;
}

void reject_unknown(const py::dict& rest, const char* what) {
  if (rest.empty()) return;
  std::string names;
  for (auto item : rest) names += (names.empty() ? "" : ", ") + std::string(py::str(item.first));
  value_error(std::string("unknown ") + what + ": " + names);
}

}  // namespace

void throw_status(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kOutOfRange) {
    throw py::value_error(status.message());
  }
  throw std::runtime_error(status.to_string());
}

SamplingParams sampling_from_dict(const py::dict& in) {
  py::dict d = py::dict(in);  // a copy we consume
  SamplingParams p;
  take(d, "n", &p.n);
  take(d, "temperature", &p.temperature);
  take(d, "top_p", &p.top_p);
  take(d, "top_k", &p.top_k);
  take(d, "min_p", &p.min_p);
  take(d, "repetition_penalty", &p.repetition_penalty);
  take(d, "presence_penalty", &p.presence_penalty);
  take(d, "frequency_penalty", &p.frequency_penalty);
  take(d, "logit_bias", &p.logit_bias);
  take(d, "allowed_token_ids", &p.allowed_token_ids);
  take(d, "bad_words", &p.bad_words);
  take(d, "min_tokens", &p.min_tokens);
  take_optional(d, "max_tokens", &p.max_tokens);
  take(d, "stop", &p.stop);
  take(d, "stop_token_ids", &p.stop_token_ids);
  take(d, "ignore_eos", &p.ignore_eos);
  take(d, "include_stop_str_in_output", &p.include_stop_str_in_output);
  take(d, "skip_special_tokens", &p.skip_special_tokens);
  take_optional(d, "seed", &p.seed);
  take_optional(d, "logprobs", &p.logprobs);
  take_optional(d, "prompt_logprobs", &p.prompt_logprobs);
  std::string mode = "raw";
  take(d, "logprobs_mode", &mode);
  if (mode == "raw" || mode == "raw_logprobs") {
    p.logprobs_mode = LogprobsMode::kRaw;
  } else if (mode == "processed" || mode == "processed_logprobs") {
    p.logprobs_mode = LogprobsMode::kProcessed;
  } else {
    value_error("logprobs_mode '" + mode + "' must be raw_logprobs or processed_logprobs");
  }
  reject_unknown(d, "sampling parameter(s)");
  if (Status s = p.validate(); !s.is_ok()) throw_status(s);
  return p;
}

std::optional<StructuredOutput> structured_from_dict(const py::object& o) {
  if (o.is_none()) return std::nullopt;
  py::dict d = py::dict(o);
  std::vector<StructuredOutput> found;
  for (const char* key : {"json", "regex", "grammar", "json_object"}) {
    if (!d.contains(key) || d[key].is_none()) continue;
    py::object v = d[key];
    StructuredOutput so;
    if (std::string(key) == "json") {
      so.kind = StructuredOutput::Kind::kJsonSchema;
      so.spec = py::isinstance<py::str>(v) ? v.cast<std::string>()
                                           : py::module_::import("json").attr("dumps")(v).cast<std::string>();
    } else if (std::string(key) == "regex") {
      so.kind = StructuredOutput::Kind::kRegex;
      so.spec = v.cast<std::string>();
    } else if (std::string(key) == "grammar") {
      so.kind = StructuredOutput::Kind::kEbnf;
      so.spec = v.cast<std::string>();
    } else if (v.cast<bool>()) {
      so.kind = StructuredOutput::Kind::kJsonObject;
    } else {
      continue;
    }
    found.push_back(std::move(so));
  }
  if (found.size() != 1) value_error("structured_outputs: give exactly one of json, regex, grammar, json_object");
  // after_reasoning: the constraint starts after the model's </think> (LLM.chat sets it in thinking mode).
  if (d.contains("after_reasoning") && !d["after_reasoning"].is_none()) {
    found[0].after_reasoning = d["after_reasoning"].cast<bool>();
  }
  return found[0];
}

EngineOptions engine_options_from_kwargs(const py::dict& in) {
  py::dict d = py::dict(in);
  EngineOptions o = unwrap(EngineOptions::with_environment(EngineOptions{}));
  take(d, "model", &o.model);
  take(d, "tokenizer", &o.tokenizer);
  take(d, "device", &o.device);
  take(d, "numerics", &o.numerics);
  take(d, "max_num_seqs", &o.max_num_seqs);
  take(d, "max_num_batched_tokens", &o.max_num_batched_tokens);
  take(d, "max_prefill_chunk", &o.max_prefill_chunk);
  take(d, "max_model_len", &o.max_model_len);
  take(d, "block_tokens", &o.block_tokens);
  take(d, "kv_blocks", &o.kv_blocks);
  take(d, "kv_cache_bytes", &o.kv_cache_bytes);
  take(d, "n_snapshot_slots", &o.n_snapshot_slots);
  take(d, "snapshot_interval_tokens", &o.snapshot_interval_tokens);
  take(d, "enable_prefix_caching", &o.enable_prefix_caching);
  take(d, "replay_mode", &o.replay_mode);
  take(d, "batch_invariant", &o.batch_invariant);
  take(d, "async_scheduling", &o.async_scheduling);
  take(d, "seed", &o.seed);
  take(d, "yoco_prefill_mode", &o.yoco_prefill_mode);
  take(d, "yoco_keep_tokens", &o.yoco_keep_tokens);
  take(d, "mtp_varlen", &o.mtp_varlen);
  take(d, "nextn_decode", &o.nextn_decode);
  take(d, "draft_min_survival", &o.draft_min_survival);
  take(d, "spec_verification", &o.spec_verification);
  take(d, "log_level", &o.log_level);
  reject_unknown(d, "engine option(s)");
  if (Status s = o.validate(); !s.is_ok()) throw_status(s);
  return o;
}

Request request_from_dict(const py::dict& in) {
  py::dict d = py::dict(in);
  Request r;
  take(d, "prompt", &r.prompt);
  take(d, "prompt_token_ids", &r.prompt_ids);
  take(d, "cache_salt", &r.cache_salt);
  take(d, "add_special_tokens", &r.add_special_tokens);
  if (d.contains("images")) {
    for (const py::handle& img : py::list(d["images"])) r.images.push_back(ImageInput{img.cast<std::string>()});
    d.attr("pop")("images");
  }
  if (d.contains("sampling")) {
    r.sampling = sampling_from_dict(py::dict(d["sampling"]));
    d.attr("pop")("sampling");
  }
  if (d.contains("structured_outputs")) {
    r.structured_output = structured_from_dict(d["structured_outputs"]);
    d.attr("pop")("structured_outputs");
  }
  reject_unknown(d, "request field(s)");
  return r;
}

namespace {

// Logprobs as (token, logprob, rank, [(id, logprob), ...]) per token: sampled tokens, or prompt
// tokens after the first.
py::list logprobs_list(const std::vector<TokenLogprobs>& lps) {
  py::list out;
  for (const TokenLogprobs& t : lps) {
    py::list top;
    for (const TokenLogprob& e : t.top) top.append(py::make_tuple(e.token, e.logprob));
    out.append(py::make_tuple(t.token, t.logprob, t.rank, top));
  }
  return out;
}

}  // namespace

py::dict output_to_dict(const GenerateOutput& out) {
  py::list seqs;
  for (const GenerateOutput::Sequence& s : out.sequences) {
    py::dict d;
    d["token_ids"] = s.token_ids;
    d["text"] = py::bytes(s.text).attr("decode")("utf-8", "replace");
    d["finish_reason"] = finish_reason_name(s.finish);
    d["error"] = s.error;
    // vLLM's stop_reason: the stop string, a stop token id, or None.
    d["stop_reason"] = !s.stop_string.empty() ? py::object(py::bytes(s.stop_string).attr("decode")("utf-8", "replace"))
                       : s.stop_token_id >= 0 ? py::object(py::int_(s.stop_token_id))
                                              : py::object(py::none());
    d["logprobs"] = logprobs_list(s.logprobs);
    seqs.append(d);
  }
  py::dict d;
  d["request_id"] = out.request_id;
  d["prompt_token_ids"] = out.prompt_ids;
  d["num_cached_tokens"] = out.n_cached_tokens;
  d["prompt_logprobs"] = logprobs_list(out.prompt_logprobs);
  d["outputs"] = seqs;
  return d;
}

py::dict event_to_dict(const TokenEvent& e) {
  py::dict d;
  d["request_id"] = e.request_id;
  d["index"] = e.sample_index;
  d["token_ids"] = e.token_ids;
  d["text"] = py::bytes(e.text).attr("decode")("utf-8", "replace");
  d["logprobs"] = logprobs_list(e.logprobs);
  d["prompt_logprobs"] = logprobs_list(e.prompt_logprobs);  // on sample 0's first event only
  d["finish_reason"] = e.finish.has_value() ? py::object(py::str(finish_reason_name(*e.finish))) : py::object(py::none());
  d["error"] = e.error;
  d["num_prompt_tokens"] = e.n_prompt_tokens;
  d["num_cached_tokens"] = e.n_cached_tokens;
  d["num_generated_tokens"] = e.n_generated_tokens;
  return d;
}

py::dict stats_to_dict(const EngineStats& s) {
  py::dict d;
  d["num_running"] = s.n_running;
  d["num_waiting"] = s.n_waiting;
  d["prompt_tokens_total"] = s.n_prompt_tokens_total;
  d["generated_tokens_total"] = s.n_generated_tokens_total;
  d["requests_finished"] = s.n_requests_finished;
  d["requests_aborted"] = s.n_requests_aborted;
  d["preemptions"] = s.n_preemptions;
  d["prefix_query_tokens"] = s.n_prefix_query_tokens;
  d["prefix_hit_tokens"] = s.n_prefix_hit_tokens;
  d["kv_usage"] = s.kv_usage;
  d["steps"] = s.n_steps;
  d["argmax_steps"] = s.n_argmax_steps;
  d["device_sampled_steps"] = s.n_device_sampled_steps;
  d["steps_ahead"] = s.n_steps_ahead;
  d["draft_rows"] = s.n_draft_rows;
  d["draft_tokens"] = s.n_draft_tokens;
  d["accepted_draft_tokens"] = s.n_accepted_draft_tokens;
  py::dict t;  // seconds by phase (EngineStats::StepTimes)
  t["schedule"] = s.step_times.schedule_s;
  t["prepare"] = s.step_times.prepare_s;
  t["forward"] = s.step_times.forward_s;
  t["sample"] = s.step_times.sample_s;
  t["update"] = s.step_times.update_s;
  t["emit"] = s.step_times.emit_s;
  d["step_seconds"] = t;
  return d;
}

}  // namespace deepinfer::python

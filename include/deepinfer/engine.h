// Public engine API: open a model once, submit requests from any thread, receive TokenEvents as
// tokens are generated, abort at any time. Offline batch generation (`generate`) is submit-many-
// and-wait. The CLI, the HTTP server and the Python module are thin adapters over this header;
// no tensor, CUDA or KV-block type appears here.
//
// Threading: an Engine owns one background step loop. submit/abort/stats are thread-safe.
// Event sinks are called on the engine thread, in token order per request, and must return
// quickly (copy the event into a queue). After the final event (finish set) a request's sink is
// never called again and every resource of the request has been freed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/sampling.h"
#include "deepinfer/status.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer {

struct EngineOptions {
  // Model: a checkpoint directory, a repo id found locally (DEEPINFER_HF_MODEL_DIR, the HF cache),
  // or "demo" (the embedded tiny model). See model.h resolve_model_dir.
  std::string model = "demo";
  // tokenizer.json path; empty: the model directory's tokenizer.json, else the default tokenizer.
  std::string tokenizer;
  // auto | cpu | cuda (DEEPINFER_ACCELERATOR). auto: cuda when this build has the CUDA backend and a
  // GPU is visible (V4 and V4.1), else cpu — as vLLM picks the GPU. Engine::options().device names
  // the backend the engine chose.
  std::string device = "auto";
  std::string numerics = "official";   // official | plain (model_v4_flash.md §3)
  int32_t max_num_seqs = 64;           // running sequences per step
  int32_t max_num_batched_tokens = 2048;  // tokens per step (decode + prefill chunks)
  int32_t max_prefill_chunk = 0;       // cap on one sequence's prefill chunk per step; 0: budget only
  int32_t max_model_len = 0;           // 0: limited by max_position_embeddings and KV capacity
  int32_t block_tokens = 256;          // positions per history block (multiple of every ratio)
  // History blocks. 0: as many as kv_cache_bytes holds, but no more than max_num_seqs sequences
  // of max_model_len tokens need (when max_model_len is set).
  int32_t kv_blocks = 0;
  int64_t kv_cache_bytes = 0;          // budget for history blocks when kv_blocks == 0; 0: 256 MiB
  int32_t n_snapshot_slots = 16;       // prefix-cache state snapshots
  // A snapshot every this many positions (a multiple of block_tokens), also while decoding, so
  // long conversations keep restart points beyond the prompt's end; 0: off (prompt ends and hit
  // boundaries only).
  int32_t snapshot_interval_tokens = 0;
  bool enable_prefix_caching = true;
  std::string replay_mode = "bounded"; // bounded | exact: SWA replay after a prefix hit without snapshot
  bool batch_invariant = true;         // DEEPINFER_BATCH_INVARIANT (the CPU backend always is)
  // Plan and queue decode step n + 1 while the device runs step n, its input tokens read where step
  // n sampled them (DEEPINFER_ASYNC_SCHEDULING; outputs identical either way; docs/engine.md,
  // "Asynchronous scheduling", says when a step is planned ahead).
  bool async_scheduling = true;
  uint64_t seed = 0;                   // engine seed for requests without their own
  // V4.1 decoder prefill truncation (DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE / _KEEP_TOKENS).
  std::string yoco_prefill_mode = "compact";
  int32_t yoco_keep_tokens = 140;
  // Speculative decoding with the checkpoint's draft module (V4: the MTP block chained; V4.1: the
  // DSpark block), verified so that outputs equal decoding without drafts (docs/engine.md,
  // "Speculative decoding"). nextn_decode (DEEPINFER_USE_NEXTN_DECODE): drafts per step, 0 = off
  // unless mtp_varlen. mtp_varlen (DEEPINFER_ENABLE_MTP_VARLEN): confidence-scheduled verification
  // — each step verifies the global budget of drafts that maximises expected tokens per second
  // (survival estimates = products of the drafter's per-draft confidences, against the step time
  // fitted as a function of its tokens), never a draft whose survival is below
  // draft_min_survival; with nextn_decode 0 the cap per request is 5 (upstream DeepInfer's
  // default; V4.1's DSpark block).
  bool mtp_varlen = false;
  int32_t nextn_decode = 0;
  float draft_min_survival = 0.0f;
  // How sampled rows verify drafts (DEEPINFER_SPEC_VERIFICATION; greedy rows always take the
  // argmax rule): "rejection" (default) — standard lossless chain rejection sampling against the
  // drafter's own distribution, the most accepted drafts; "coupled" — the drafter samples with the
  // request's own noise and a draft is accepted when it is the token decoding without drafts would
  // sample there, so seeded outputs are identical with and without drafts (the deterministic
  // option of grammar_sampling_determinism.md §5.3; fewer acceptances at temperature > 0).
  std::string spec_verification = "rejection";
  std::string log_level;               // DEEPINFER_LOG_LEVEL (debug|info|warn|error|off); "": keep

  // Applies DeepInfer's environment variables (read once, here) on top of `base`: DEEPINFER_HF_MODEL_DIR
  // (only used by model resolution), DEEPINFER_LOG_LEVEL, DEEPINFER_ACCELERATOR, DEEPINFER_ENABLE_MTP_VARLEN,
  // DEEPINFER_USE_NEXTN_DECODE, DEEPINFER_BATCH_INVARIANT, DEEPINFER_ASYNC_SCHEDULING, DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE,
  // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS. Unknown DEEPINFER_* names are reported as warnings;
  // malformed values are errors naming the variable. DEEPINFER_CACHE_DIR and DEEPINFER_TOKENIZER
  // are known too (read by cache_dir() and Tokenizer::load_default()).
  static Result<EngineOptions> with_environment(EngineOptions base);
  // Same, reading variables from `env` ("NAME=value" entries) instead of the process environment;
  // warnings are appended to `warnings` instead of being logged (tests, embedding applications).
  static Result<EngineOptions> with_environment(EngineOptions base, const std::vector<std::string>& env,
                                                std::vector<std::string>* warnings);
  // Checks every field on its own (model-dependent limits are checked by Engine::open); the
  // message names the field and the allowed values.
  Status validate() const;
};

using RequestId = uint64_t;

enum class FinishReason : uint8_t { kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"

// Constrained decoding for one request (compiled by the grammar engine; errors name the keyword).
// kDsmlToolCalls: the output is DeepSeek DSML tool-call markup (docs/chat-encoding.md); `spec` is
// a JSON object, booleans optional with these defaults: {"tools": [{"name": "f", "parameters":
// {JSON schema, default {}}}, ...], "required": false (a tool-call block must come), "thinking":
// false (output starts with reasoning closed by </think>), "allow_content": true (text before the
// block), "parallel_calls": true (several invokes), "v41_tags": false (V4.1 tag spelling),
// "any_order": true (parameters in any order, at most 10 per tool; false: schema order)}.
// after_reasoning (reasoning-aware structured output, as vLLM's reasoning parsers): the output
// starts with free reasoning closed by the tokenizer's `</think>` special token, and only what
// follows it must match the constraint. Until `</think>` every token is allowed except EOS, so
// the answer cannot be skipped; `</think>` itself is not part of the constrained text. A
// tokenizer without `</think>` is an INVALID_ARGUMENT at submit naming
// structured_output.after_reasoning, and so is after_reasoning with kDsmlToolCalls (its spec has
// its own "thinking" flag).
struct StructuredOutput {
  enum class Kind : uint8_t { kJsonSchema, kRegex, kEbnf, kJsonObject, kDsmlToolCalls } kind = Kind::kJsonSchema;
  std::string spec;  // the schema / regex / grammar text / DSML spec (empty for kJsonObject)
  bool after_reasoning = false;  // constrain only the answer after `</think>` (see above)
};

// An image for a vision model (DeepSeek-V4.1): the file's bytes (PNG or JPEG).
struct ImageInput {
  std::string data;
};

struct Request {
  // Exactly one of prompt_ids / prompt. A text prompt is tokenized with special-token matching
  // on (trusted offline input); untrusted chat goes through chat.h render_ids instead.
  std::vector<int32_t> prompt_ids;
  std::string prompt;
  SamplingParams sampling;
  std::optional<StructuredOutput> structured_output;
  std::string cache_salt;  // isolates prefix-cache sharing between tenants
  std::string request_label;  // free-form id for logs (e.g. the HTTP request id)
  // Text prompts: prepend BOS unless the text already starts with it (HF add_special_tokens).
  bool add_special_tokens = true;
  // Vision models: one image per image placeholder token (`<｜deepseek_image｜>`) in the prompt, in
  // order; each placeholder becomes the image's span of rows (model_v41_flash.md §8). Requests
  // with images share cached prefixes only with requests that carry the same images. Empty: the
  // prompt is taken as it is (a placeholder id is then an ordinary token).
  std::vector<ImageInput> images;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // sorted, at most SamplingParams::logprobs (prompt_logprobs) entries
  // 1-based rank of `token` in the whole distribution `logprob` describes: its place in `top` were
  // the list complete (ties go to the lower id), as vLLM's Logprob.rank.
  int32_t rank = 0;
};

struct TokenEvent {
  RequestId request_id = 0;
  int32_t sample_index = 0;              // which of the request's n sequences
  std::vector<int32_t> token_ids;        // tokens generated since the previous event
  std::string text;                      // their text (UTF-8 complete; stop strings held back/removed)
  std::vector<TokenLogprobs> logprobs;   // one per token when requested
  // SamplingParams::prompt_logprobs: entry i - 1 is prompt token i's logprob given tokens [0, i),
  // for i = 1 .. n_prompt - 1 (the first token has none), of the raw distribution. On sample 0's
  // first event that carries tokens; empty everywhere else.
  std::vector<TokenLogprobs> prompt_logprobs;
  std::optional<FinishReason> finish;    // set on the sequence's last event
  std::string error;                     // message when finish == kError
  // What ended a kStop sequence, as vLLM's stop_reason (on the last event): the stop string that
  // matched, or a stop_token_ids id; neither for EOS (unless ignore_eos) or a grammar's end.
  std::string stop_string;
  int32_t stop_token_id = -1;
  int32_t n_prompt_tokens = 0;
  int32_t n_cached_tokens = 0;           // prompt tokens served from the prefix cache
  int32_t n_generated_tokens = 0;        // cumulative for this sequence
};

using EventSink = std::function<void(const TokenEvent&)>;

struct GenerateOutput {
  struct Sequence {
    std::vector<int32_t> token_ids;
    std::string text;
    std::vector<TokenLogprobs> logprobs;
    FinishReason finish = FinishReason::kStop;
    std::string error;
    std::string stop_string;     // TokenEvent::stop_string of its last event
    int32_t stop_token_id = -1;  // TokenEvent::stop_token_id of its last event
  };
  RequestId request_id = 0;
  // The request's prompt ids (a text prompt tokenized), image placeholders as given: one id per
  // image where the model ran the image's span (TokenEvent::n_prompt_tokens counts those rows).
  std::vector<int32_t> prompt_ids;
  int32_t n_cached_tokens = 0;
  std::vector<TokenLogprobs> prompt_logprobs;  // TokenEvent::prompt_logprobs (sampling.prompt_logprobs)
  std::vector<Sequence> sequences;  // n of them
};

struct EngineStats {
  int64_t n_running = 0, n_waiting = 0;
  int64_t n_prompt_tokens_total = 0, n_generated_tokens_total = 0;
  int64_t n_requests_finished = 0, n_requests_aborted = 0, n_preemptions = 0;
  int64_t n_prefix_query_tokens = 0, n_prefix_hit_tokens = 0;  // hit rate = hits / queries
  double kv_usage = 0.0;  // fraction of history blocks in use
  // Steps taken in (their tokens accepted). The step counts below are counted with it, at once: a
  // snapshot never has a step in one count and not yet in another.
  int64_t n_steps = 0;
  // Steps whose sampled rows were all greedy without logit processors: each row's token is the
  // argmax taken where the logits are (on a GPU: one id per row copied to the host, not the row's
  // logits; raw logprobs, when asked, computed there too).
  int64_t n_argmax_steps = 0;
  // Steps whose sampled rows were all sampled where the logits are (the argmax steps above, and
  // steps with temperature rows — top-k, top-p, min-p, raw logprobs; no bias, masks, penalties or
  // processed logprobs: Ops::sample_rows, Ops::logprob_rows), one id (+ the logprobs) per row
  // copied back.
  int64_t n_device_sampled_steps = 0;
  // Steps planned and queued before the previous step's tokens reached the host (async_scheduling).
  int64_t n_steps_ahead = 0;
  // Speculative decoding: draft tokens verified, and those accepted (the mean accepted length per
  // verifying row is 1 + accepted / rows; acceptance rate = accepted / verified).
  int64_t n_draft_tokens = 0, n_accepted_draft_tokens = 0, n_draft_rows = 0;
  // Wall time of the engine's steps on its loop thread, summed by phase (seconds): schedule;
  // prepare (plan -> the model's batch, block tables, state-slot duties); forward (the model's step
  // until its outputs are on the host: on a GPU the step's prepare pass, the graph launch, the wait
  // for the device and the logits or ids copied back); sample (+ stop checks); update (scheduler);
  // emit (detokenize, build the events). Everything but forward is host time that the device waits
  // through in a synchronous step loop: the engine's own per-step overhead.
  struct StepTimes {
    double schedule_s = 0, prepare_s = 0, forward_s = 0, sample_s = 0, update_s = 0, emit_s = 0;
    double total_s() const { return schedule_s + prepare_s + forward_s + sample_s + update_s + emit_s; }
  };
  StepTimes step_times;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> open(const EngineOptions& options);
  virtual ~Engine() = default;

  // Validates the request (prompt length vs max_model_len, sampling fields, grammar) and queues
  // it; errors name the offending field. The sink receives every event of the request.
  virtual Result<RequestId> submit(Request request, EventSink sink) = 0;
  // Cancels a request at any point; its sink gets a final event with FinishReason::kAbort.
  // Unknown or finished ids are not an error (the race with completion is normal).
  virtual void abort(RequestId id) = 0;
  // Submits all, waits for all; outputs in input order. on_progress(n_done, n_total) is called
  // from the calling thread after each completed request.
  virtual Result<std::vector<GenerateOutput>> generate(
      std::vector<Request> requests, std::function<void(size_t, size_t)> on_progress = nullptr) = 0;

  virtual std::shared_ptr<const Tokenizer> tokenizer() const = 0;
  virtual EngineStats stats() const = 0;
  virtual const EngineOptions& options() const = 0;
  virtual std::string model_dir() const = 0;
  virtual std::string model_family() const = 0;  // "deepseek_v4" | "deepseek_v41"
  virtual int32_t max_model_len() const = 0;
  // Stops accepting requests; with drain, waits for in-flight ones, otherwise aborts them.
  virtual void shutdown(bool drain) = 0;
};

}  // namespace deepinfer

// Shared engine and sampling flags (see engine_flags.h). Not a command: registers nothing.
#include "engine_flags.h"

#include "command.h"

namespace deepinfer::cli {

bool is_demo_model(const std::string& model) { return model.empty() || model == "demo"; }

std::shared_ptr<EngineFlags> add_engine_flags(CLI::App* app) {
  auto f = std::make_shared<EngineFlags>();
  f->app = app;
  EngineOptions& o = f->options;
  app->add_option("--model", o.model,
                  "checkpoint directory, repo id (found via DEEPINFER_HF_MODEL_DIR or the HF cache), or "
                  "'demo' (the embedded tiny model)")
      ->capture_default_str();
  app->add_option("--tokenizer", o.tokenizer, "tokenizer.json (default: the model's, else the prepared one)");
  app->add_option("--device", o.device,
                  "auto | cpu | cuda (default: DEEPINFER_ACCELERATOR, else auto: cuda when this build has it, "
                  "a GPU is visible and the model runs there, else cpu)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app->add_option("--numerics", o.numerics, "official | plain")->check(CLI::IsMember({"official", "plain"}))
      ->capture_default_str();
  app->add_option("--max-num-seqs", o.max_num_seqs, "running sequences per step")->capture_default_str();
  app->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "tokens per step")->capture_default_str();
  app->add_option("--max-model-len", o.max_model_len, "longest sequence (0: model and KV limits)")
      ->capture_default_str();
  app->add_option("--kv-blocks", o.kv_blocks, "history blocks (0: from --kv-cache-mib)")->capture_default_str();
  app->add_option_function<int64_t>(
      "--kv-cache-mib", [f](int64_t mib) { f->options.kv_cache_bytes = mib << 20; },
      "history-block budget in MiB when --kv-blocks is 0 (default 256)");
  app->add_option("--replay-mode", o.replay_mode, "bounded | exact: SWA replay after a prefix hit")
      ->check(CLI::IsMember({"bounded", "exact"}))
      ->capture_default_str();
  app->add_option("--snapshot-interval", o.snapshot_interval_tokens,
                  "a prefix-cache state snapshot every this many positions, also while decoding "
                  "(a multiple of the block size; 0: prompt ends and hit boundaries only)")
      ->capture_default_str();
  app->add_option("--nextn-decode", o.nextn_decode,
                  "speculative decoding: drafts per step from the checkpoint's MTP / DSpark module "
                  "(0: off unless --mtp-varlen; lossless: the output distribution is that without drafts)")
      ->capture_default_str();
  app->add_flag("--mtp-varlen", o.mtp_varlen,
                "speculative decoding with confidence-scheduled verification: each step verifies the "
                "drafts that maximise expected tokens per second");
  app->add_option("--spec-verification", o.spec_verification,
                  "how sampled rows verify drafts: rejection (standard rejection sampling, the most "
                  "accepted drafts) | coupled (seeded outputs identical to decoding without drafts)")
      ->check(CLI::IsMember({"rejection", "coupled"}))
      ->capture_default_str();
  app->add_option("--draft-min-survival", o.draft_min_survival,
                  "with --mtp-varlen: no draft whose estimated survival is below this is verified")
      ->capture_default_str();
  app->add_flag("!--no-prefix-caching", o.enable_prefix_caching, "disable the prefix cache");
  app->add_flag("!--no-async-scheduling", o.async_scheduling,
                "wait for each decode step's tokens before planning the next (default: plan ahead)");
  app->add_option("--engine-seed", o.seed, "seed for requests without --seed")->capture_default_str();
  return f;
}

std::shared_ptr<SamplingFlags> add_sampling_flags(CLI::App* app, int32_t default_max_tokens) {
  auto f = std::make_shared<SamplingFlags>();
  f->max_tokens = default_max_tokens;
  SamplingParams& p = f->params;
  app->add_option("--max-tokens", f->max_tokens, "tokens to generate per sequence")->capture_default_str();
  app->add_option("--temperature", p.temperature, "0 = greedy")->capture_default_str();
  app->add_option("--top-p", p.top_p, "nucleus mass (1 = off)")->capture_default_str();
  app->add_option("--top-k", p.top_k, "keep the k most likely tokens (-1 = off)")->capture_default_str();
  app->add_option("--min-p", p.min_p, "drop tokens below min_p x the top probability")->capture_default_str();
  app->add_option("--repetition-penalty", p.repetition_penalty, "vLLM definition (1 = off)")->capture_default_str();
  app->add_option("--presence-penalty", p.presence_penalty, "[-2, 2]")->capture_default_str();
  app->add_option("--frequency-penalty", p.frequency_penalty, "[-2, 2]")->capture_default_str();
  app->add_option("--stop", p.stop, "stop string (repeatable)");
  app->add_flag("--ignore-eos", p.ignore_eos, "keep generating after EOS");
  app->add_option_function<uint64_t>("--seed", [f](uint64_t s) { f->seed = s; },
                                     "per-request seed (reproducible sampling)");
  app->add_option_function<int32_t>("--logprobs", [f](int32_t n) { f->logprobs = n; },
                                    "top logprobs per generated token (0..20)");
  app->add_option_function<int32_t>("--prompt-logprobs", [f](int32_t n) { f->prompt_logprobs = n; },
                                    "each prompt token's logprob, rank and this many top logprobs (0..20; "
                                    "JSONL output; such prompts read no cached prefix)");
  app->add_option("--n", p.n, "sequences per prompt")->capture_default_str();
  return f;
}

SamplingParams sampling_from_flags(const SamplingFlags& flags) {
  SamplingParams p = flags.params;
  p.max_tokens = flags.max_tokens;
  p.seed = flags.seed;
  p.logprobs = flags.logprobs;
  p.prompt_logprobs = flags.prompt_logprobs;
  return p;
}

std::unique_ptr<Engine> open_engine_or_fail(const std::string& command, const EngineFlags& flags) {
  auto options = EngineOptions::with_environment(flags.options);
  if (!options.is_ok()) fail(command, options.status().message(), 2);
  if (flags.app != nullptr && flags.app->count("--device") > 0) options->device = flags.options.device;
  auto engine = Engine::open(*options);
  if (!engine.is_ok()) {
    fail(command, engine.status().message(), engine.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  }
  return std::move(engine).value();
}

}  // namespace deepinfer::cli

// `deepinfer bench-engine`: the engine's offline throughput end to end (requests in, tokens out,
// per-step host overhead by phase), written as JSON like `deepinfer bench`.
#include "command.h"
#include "deepinfer/bench.h"

namespace deepinfer::cli {
namespace {

void setup(CLI::App* app) {
  auto o = std::make_shared<EngineBenchOptions>();
  auto out = std::make_shared<std::string>();
  app->add_option("--model", o->model, "checkpoint dir or name; empty: full-width synthetic V4-Flash on the GPU");
  app->add_option("--layers", o->layers, "synthetic model: main layers")->capture_default_str();
  app->add_option("--device", o->device, "cuda | cpu")->capture_default_str();
  app->add_option("--numerics", o->numerics, "official | plain")->capture_default_str();
  app->add_option("--concurrency", o->concurrency, "requests submitted at once, one row each")->delimiter(',');
  app->add_option("--input-len", o->input_len, "prompt tokens per request (random ids)")->capture_default_str();
  app->add_option("--output-len", o->output_len, "tokens generated per request (ignore_eos)")->capture_default_str();
  app->add_option("--temperature", o->temperature, "0: greedy; sampled on the device unless --host-sampling")
      ->capture_default_str();
  app->add_option("--top-p", o->top_p, "nucleus sampling")->capture_default_str();
  app->add_option("--top-k", o->top_k, "top-k sampling (<= 0: off)")->capture_default_str();
  app->add_option("--repetition-penalty", o->repetition_penalty, "1: off")->capture_default_str();
  app->add_option("--frequency-penalty", o->frequency_penalty, "0: off")->capture_default_str();
  app->add_option("--logprobs", o->logprobs, ">= 0: raw logprobs and this many top logprobs per token")
      ->capture_default_str();
  app->add_option("--regex", o->regex,
                  "constrain every request by this regex (structured outputs; requests may end where it does)");
  app->add_flag("--host-sampling", o->host_sampling,
                "sample every step on the host from the copied logits (the path of rows with bias, masks, penalties)");
  app->add_flag("!--no-async-scheduling", o->async_scheduling,
                "wait for each step's tokens before planning the next (the synchronous loop, for comparison)");
  app->add_option("--nextn-decode", o->nextn_decode,
                  "speculative decoding: drafts per step (the synthetic model gets the MTP block)")
      ->capture_default_str();
  app->add_flag("--mtp-varlen", o->mtp_varlen, "speculative decoding with confidence-scheduled verification");
  app->add_option("--spec-verification", o->spec_verification,
                  "how sampled rows verify drafts: rejection (host-verified) | coupled (where the logits are)")
      ->check(CLI::IsMember({"rejection", "coupled"}))
      ->capture_default_str();
  app->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "engine: tokens per step")
      ->capture_default_str();
  app->add_option("--seed", o->seed, "prompt and sampling seed")->capture_default_str();
  app->add_option("--commit", o->commit, "commit id to record");
  app->add_option("--out", *out, "write the JSON here (default: stdout)");
  app->callback([o, out, app] {
    o->command = command_line("bench-engine", *app);
    auto res = run_engine_benchmark(*o);
    if (!res.is_ok()) fail("bench-engine", res.status().message(), 1);
    write_output("bench-engine", *res, *out);
  });
}

DI_CLI_COMMAND("bench-engine", "Benchmark the engine end to end: offline throughput, TTFT, per-step host time",
               setup);

}  // namespace
}  // namespace deepinfer::cli

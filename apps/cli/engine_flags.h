// Command-line flags shared by the commands that run the Engine (generate, chat): the engine
// options (model, device, numerics, batching and KV sizes, replay mode) and the sampling options.
// Not a command itself. Opening applies DeepInfer's environment variables (read once) on top of
// the flags' defaults, then the flags the user actually gave win.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::cli {

struct EngineFlags {
  EngineOptions options;
  std::vector<std::string> given;  // option names the user set (they override the environment)
  CLI::App* app = nullptr;
};

struct SamplingFlags {
  SamplingParams params;
  int32_t max_tokens = 64;
  std::optional<uint64_t> seed;
  std::optional<int32_t> logprobs;
  std::optional<int32_t> prompt_logprobs;
};

// Registers the engine flags on `app` (the result must outlive parsing).
std::shared_ptr<EngineFlags> add_engine_flags(CLI::App* app);
// Registers the sampling flags; `default_max_tokens` is the --max-tokens default.
std::shared_ptr<SamplingFlags> add_sampling_flags(CLI::App* app, int32_t default_max_tokens);
// The SamplingParams the flags describe.
SamplingParams sampling_from_flags(const SamplingFlags& flags);

// Opens the engine, or prints "deepinfer <command>: <message>" and exits (2 for bad options,
// 1 otherwise).
std::unique_ptr<Engine> open_engine_or_fail(const std::string& command, const EngineFlags& flags);

// True when `model` names the embedded demo model.
bool is_demo_model(const std::string& model);

}  // namespace deepinfer::cli

// `deepinfer gen-checkpoint`: writes a synthetic checkpoint in the official DeepSeek-V4 format.
#include <cstdio>

#include "command.h"
#include "deepinfer/model.h"

namespace deepinfer::cli {
namespace {

void setup(CLI::App* app) {
  auto opts = std::make_shared<SyntheticCheckpointOptions>();
  app->add_option("--config", opts->config, "test config (tiny-v4f, tiny-short, micro) or a directory with config.json")
      ->capture_default_str();
  app->add_option("--out", opts->out_dir, "output directory")->required();
  app->add_option("--seed", opts->seed, "generator seed")->capture_default_str();
  app->add_option("--layers-per-shard", opts->layers_per_shard, "main layers per shard (0: all in the first)")
      ->capture_default_str();
  app->add_option("--layers", opts->override_layers, "override the number of main layers (keeps widths)");
  app->callback([opts] {
    const Status s = write_synthetic_checkpoint(*opts);
    if (!s.is_ok()) fail("gen-checkpoint", s.message(), 2);
    std::printf("wrote %s (config %s, seed %llu)\n", opts->out_dir.c_str(), opts->config.c_str(),
                static_cast<unsigned long long>(opts->seed));
  });
}

DI_CLI_COMMAND("gen-checkpoint", "Write a synthetic checkpoint in the official format", setup);

}  // namespace
}  // namespace deepinfer::cli

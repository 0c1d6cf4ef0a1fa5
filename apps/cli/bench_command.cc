// `deepinfer bench`: decode/prefill throughput at context frontiers with roofline shares, written
// as JSON (bench/results/ keeps every run that a figure in the docs quotes).
#include "command.h"
#include "deepinfer/bench.h"

namespace deepinfer::cli {
namespace {

void setup(CLI::App* app) {
  auto o = std::make_shared<BenchOptions>();
  auto out = std::make_shared<std::string>();
  app->add_option("--model", o->model, "checkpoint dir or name; empty: full-width synthetic V4-Flash on the GPU");
  app->add_option("--layers", o->layers, "synthetic model: main layers")->capture_default_str();
  app->add_option("--device", o->device, "cuda | cpu")->capture_default_str();
  app->add_option("--numerics", o->numerics, "official | plain")->capture_default_str();
  app->add_option("--batch", o->batches, "decode batch sizes (0: none)")->delimiter(',');
  app->add_option("--context", o->contexts, "decode context lengths")->delimiter(',');
  app->add_option("--prefill", o->prefill_lengths, "prefill prompt lengths (0: none)")->delimiter(',');
  app->add_option("--prefill-chunk", o->prefill_chunk, "prefill chunk tokens")->capture_default_str();
  app->add_option("--iters", o->iters, "timed iterations")->capture_default_str();
  app->add_option("--memory-budget-gib", o->memory_budget_gib, "skip rows whose KV exceeds this")->capture_default_str();
  app->add_flag("!--no-breakdown", o->kernel_breakdown, "skip the per-op breakdown");
  app->add_flag("--timeline", o->timeline, "decode rows: one step's kernel timeline (CUPTI; idle gaps)");
  app->add_option("--baseline", o->baseline_json, "JSON of a baseline run to embed");
  app->add_option("--commit", o->commit, "commit id to record");
  app->add_option("--out", *out, "write the JSON here (default: stdout)");
  app->callback([o, out, app] {
    o->command = command_line("bench", *app);
    auto res = run_benchmark(*o);
    if (!res.is_ok()) fail("bench", res.status().message(), 1);
    write_output("bench", *res, *out);
  });
}

DI_CLI_COMMAND("bench", "Benchmark decode and prefill throughput (JSON with roofline shares)", setup);

}  // namespace
}  // namespace deepinfer::cli

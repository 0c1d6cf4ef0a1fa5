// `deepinfer generate [PROMPT ...]`: offline batch generation through the Engine. Prompts come
// from the arguments (text, or token ids with --ids) or a JSONL file; with none, a built-in demo
// prompt runs, so `./dev.sh run` works on a fresh machine with the embedded demo model. Results
// go to stdout as readable text, or as JSONL with --output-jsonl (see generate_jsonl.h). Batch
// jobs show a progress bar on stderr. Exit codes: 2 bad arguments, 1 engine failure.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "command.h"
#include "deepinfer/model.h"
#include "engine_flags.h"
#include "generate_jsonl.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "generate";
constexpr const char* kDemoPrompt = "The three most important ideas in computer science are";

struct GenerateArgs {
  std::vector<std::string> prompts;
  std::string prompts_jsonl;
  std::string output_jsonl;
  bool ids = false;
  bool progress = false;
  bool no_progress = false;
  std::string json_schema;  // structured outputs (at most one of the three)
  std::string regex;
  std::string grammar;
  std::vector<std::string> images;  // files attached to every argument prompt, in order
};

// The --json-schema / --regex / --grammar constraint, if any ('@file' reads a file).
std::optional<StructuredOutput> structured_from_args(const GenerateArgs& args) {
  auto text = [](const std::string& v) {
    if (v.empty() || v[0] != '@') return v;
    std::ifstream in(v.substr(1));
    if (!in) fail(kName, "cannot read " + v.substr(1), 2);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const int n = !args.json_schema.empty() + !args.regex.empty() + !args.grammar.empty();
  if (n == 0) return std::nullopt;
  if (n > 1) fail(kName, "give at most one of --json-schema, --regex, --grammar", 2);
  if (!args.json_schema.empty()) return StructuredOutput{StructuredOutput::Kind::kJsonSchema, text(args.json_schema)};
  if (!args.regex.empty()) return StructuredOutput{StructuredOutput::Kind::kRegex, text(args.regex)};
  return StructuredOutput{StructuredOutput::Kind::kEbnf, text(args.grammar)};
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& c : s) c = (c == ',') ? ' ' : c;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (end == tok.c_str() || *end != '\0' || v < 0 || v > INT32_MAX) fail(kName, "'" + tok + "' is not a token id", 2);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) fail(kName, "an --ids prompt has no token ids", 2);
  return ids;
}

std::vector<PromptItem> collect_prompts(const GenerateArgs& args, const SamplingParams& sampling) {
  std::vector<PromptItem> items;
  if (!args.prompts_jsonl.empty()) {
    auto read = read_prompts_jsonl(args.prompts_jsonl, sampling);
    if (!read.is_ok()) fail(kName, read.status().message(), 2);
    items = std::move(read).value();
  }
  std::vector<ImageInput> images;
  for (const std::string& path : args.images) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.is_open() || bytes.empty()) fail(kName, "--image " + path + ": cannot read the file (or it is empty)", 2);
    images.push_back(ImageInput{std::move(bytes)});
  }
  for (const std::string& p : args.prompts) {
    PromptItem item;
    item.request.sampling = sampling;
    item.request.images = images;
    item.display = p;
    if (args.ids) {
      item.request.prompt_ids = parse_ids(p);
    } else {
      item.request.prompt = p;
    }
    items.push_back(std::move(item));
  }
  if (items.empty()) {
    PromptItem demo;
    demo.request.sampling = sampling;
    demo.request.prompt = demo.display = kDemoPrompt;
    items.push_back(std::move(demo));
  }
  return items;
}

// "[#########-----------]  12/40 requests  3.1 s" redrawn in place on stderr.
void draw_progress(size_t done, size_t total, double seconds) {
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '-');
  std::fprintf(stderr, "\r[%s] %zu/%zu requests  %.1f s", bar.c_str(), done, total, seconds);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

void print_text(const std::vector<PromptItem>& items, const std::vector<GenerateOutput>& outs, bool ids) {
  for (size_t i = 0; i < outs.size(); ++i) {
    std::printf("=== prompt %zu (%zu tokens) ===\n%s\n", i, outs[i].prompt_ids.size(), items[i].display.c_str());
    for (size_t k = 0; k < outs[i].sequences.size(); ++k) {
      const GenerateOutput::Sequence& s = outs[i].sequences[k];
      std::printf("--- output %zu (%zu tokens, finish: %s) ---\n%s\n", k, s.token_ids.size(),
                  finish_reason_name(s.finish), s.text.c_str());
      if (!s.error.empty()) std::printf("error: %s\n", s.error.c_str());
      if (ids) {
        std::printf("ids:");
        for (int32_t t : s.token_ids) std::printf(" %d", t);
        std::printf("\n");
      }
    }
  }
}

void write_jsonl(const std::string& path, const std::vector<PromptItem>& items, const std::vector<GenerateOutput>& outs) {
  std::string text;
  for (size_t i = 0; i < outs.size(); ++i) text += output_record(i, items[i], outs[i]).dump() + "\n";
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) fail(kName, "cannot write " + path, 1);
}

void run(const GenerateArgs& args, const EngineFlags& engine_flags, const SamplingFlags& sampling_flags) {
  const std::vector<PromptItem> items = collect_prompts(args, sampling_from_flags(sampling_flags));
  const bool demo = is_demo_model(engine_flags.options.model);
  if (demo && args.output_jsonl != "-") {
    std::printf("DeepInfer demo: the embedded tiny DeepSeek-V4-Flash (random weights, real tokenizer), "
                "generated on first use under %s.\nIts text is random by design; use --model <dir|repo id> "
                "for real weights.\n\n", cache_dir().c_str());
  }
  std::unique_ptr<Engine> engine = open_engine_or_fail(kName, engine_flags);
  const std::optional<StructuredOutput> constraint = structured_from_args(args);
  std::vector<Request> requests;
  for (const PromptItem& item : items) {
    requests.push_back(item.request);
    if (constraint) requests.back().structured_output = constraint;
  }
  const bool show_bar = !args.no_progress && (args.progress || (items.size() > 1 && isatty(STDERR_FILENO)));
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (show_bar) draw_progress(0, items.size(), 0.0);
  auto outs = engine->generate(std::move(requests), [&](size_t done, size_t total) {
    if (show_bar) draw_progress(done, total, seconds());
  });
  if (!outs.is_ok()) fail(kName, outs.status().message(), outs.status().code() == StatusCode::kInvalidArgument ? 2 : 1);
  const double elapsed = seconds();
  if (!args.output_jsonl.empty()) write_jsonl(args.output_jsonl, items, *outs);
  if (args.output_jsonl != "-") print_text(items, *outs, args.ids);
  int64_t n_prompt = 0, n_gen = 0;
  for (const GenerateOutput& o : *outs) {
    n_prompt += static_cast<int64_t>(o.prompt_ids.size());
    for (const auto& s : o.sequences) n_gen += static_cast<int64_t>(s.token_ids.size());
  }
  std::fprintf(stderr, "%zu requests: %lld prompt + %lld generated tokens in %.2f s (%.1f generated tok/s) on %s\n",
               outs->size(), static_cast<long long>(n_prompt), static_cast<long long>(n_gen), elapsed,
               elapsed > 0 ? static_cast<double>(n_gen) / elapsed : 0.0, engine->model_dir().c_str());
  engine->shutdown(/*drain=*/true);
}

void setup(CLI::App* app) {
  auto args = std::make_shared<GenerateArgs>();
  auto engine_flags = add_engine_flags(app);
  auto sampling_flags = add_sampling_flags(app, 64);
  app->add_option("prompts", args->prompts, "prompt texts (token ids with --ids); none: a demo prompt");
  app->add_option("--prompts-jsonl", args->prompts_jsonl,
                  "JSONL file of prompts: {\"prompt\": ...} or {\"prompt_token_ids\": [...]}, optional "
                  "\"id\" and per-line sampling fields");
  app->add_option("--output-jsonl", args->output_jsonl, "write one JSON result per prompt here ('-' = stdout)");
  app->add_flag("--ids", args->ids, "prompts are token ids (\"0 1 2\"); also print generated ids");
  app->add_option("--image", args->images,
                  "image file (PNG or JPEG) for each prompt argument's image placeholders "
                  "(<｜deepseek_image｜>, V4.1), in order; repeat for several");
  app->add_option("--json-schema", args->json_schema, "constrain the output to this JSON schema (text or @file)");
  app->add_option("--regex", args->regex, "constrain the output to this regex (text or @file)");
  app->add_option("--grammar", args->grammar, "constrain the output to this EBNF/GBNF grammar (text or @file)");
  app->add_flag("--progress", args->progress, "always show the progress bar");
  app->add_flag("--no-progress", args->no_progress, "never show the progress bar");
  app->callback([args, engine_flags, sampling_flags] { run(*args, *engine_flags, *sampling_flags); });
}

}  // namespace

DI_CLI_COMMAND(kName, "Generate text for prompts (arguments or JSONL) with the offline engine", setup);

}  // namespace deepinfer::cli

// `deepinfer top`: runs the model on a prompt of token ids and prints the most likely next tokens.
#include <cstdio>
#include <sstream>

#include "command.h"
#include "deepinfer/model.h"

namespace deepinfer::cli {
namespace {

struct TopArgs {
  ScorerOptions scorer;
  std::string ids;
  int64_t top = 10;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    if (end == tok.c_str() || *end != '\0' || v < 0 || v > INT32_MAX) fail("top", "'" + tok + "' is not a token id", 2);
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) fail("top", "no token ids given (use --ids \"0 1 2\")", 2);
  return ids;
}

void setup(CLI::App* app) {
  auto args = std::make_shared<TopArgs>();
  app->add_option("--model", args->scorer.model, "checkpoint directory, repo id, or 'demo'")->capture_default_str();
  app->add_option("--ids", args->ids, "prompt token ids, space-separated")->required();
  app->add_option("--top", args->top, "how many tokens to print")->capture_default_str();
  app->add_option("--numerics", args->scorer.numerics, "official | plain")->capture_default_str();
  app->add_option("--device", args->scorer.device, "cpu | cuda")->capture_default_str();
  app->callback([args] {
    const std::vector<int32_t> ids = parse_ids(args->ids);
    auto scorer = Scorer::open(args->scorer);
    if (!scorer.is_ok()) fail("top", scorer.status().message(), 2);
    auto top = (*scorer)->top_next(ids, args->top);
    if (!top.is_ok()) fail("top", top.status().message(), 1);
    std::printf("model: %s\nnext-token distribution after %zu tokens:\n", (*scorer)->model_dir().c_str(), ids.size());
    std::printf("%6s %10s %12s %10s\n", "rank", "token", "logit", "prob");
    int rank = 1;
    for (const TokenProb& t : *top) std::printf("%6d %10d %12.5f %10.6f\n", rank++, t.id, t.logit, t.prob);
  });
}

DI_CLI_COMMAND("top", "Print the most likely next tokens after a prompt of token ids", setup);

}  // namespace
}  // namespace deepinfer::cli

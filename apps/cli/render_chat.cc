// `deepinfer render-chat`: one conversation as JSON on stdin -> the exact DeepSeek prompt text on
// stdout (no trailing newline), or with --ids its token ids on one line, space-separated. The JSON
// is a message list or {"messages", "tools", "thinking_mode", "reasoning_effort", "drop_thinking",
// "add_bos"} (docs/chat-encoding.md). Bad JSON, wrong types or an unrenderable conversation exit
// with 2 and a message naming the field; a tokenizer that cannot be loaded exits with 1.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "command.h"
#include "deepinfer/chat.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "render-chat";

struct RenderChatOptions {
  std::string family = "v4";
  std::string tokenizer_path;
  bool ids = false;
};

void run(const RenderChatOptions& opt) {
  chat::ModelFamily family = opt.family == "v41" ? chat::ModelFamily::kV41 : chat::ModelFamily::kV4;
  std::string json((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto input = chat::parse_chat_json(json, family);
  if (!input.is_ok()) fail(kName, input.status().message(), 2);
  std::string out;
  if (!opt.ids) {
    auto text = chat::render_text(input->messages, input->options);
    if (!text.is_ok()) fail(kName, text.status().message(), 2);
    out = std::move(text).value();
  } else {
    auto tok = opt.tokenizer_path.empty() ? Tokenizer::load_default()
                                          : Tokenizer::load(opt.tokenizer_path);
    if (!tok.is_ok()) fail(kName, tok.status().message(), 1);
    auto ids = chat::render_ids(input->messages, input->options, **tok);
    if (!ids.is_ok()) fail(kName, ids.status().message(), 2);
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string((*ids)[i]);
    }
    out.push_back('\n');
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void setup(CLI::App* app) {
  auto opt = std::make_shared<RenderChatOptions>();
  app->add_option("--model-family", opt->family, "v4 (DeepSeek-V4-Flash) or v41 (V4.1-Flash)")
      ->check(CLI::IsMember({"v4", "v41"}));
  app->add_flag("--ids", opt->ids, "print token ids (structural: client text never yields a "
                                   "control token) instead of the text");
  app->add_option("--tokenizer", opt->tokenizer_path,
                  "tokenizer.json for --ids (default: $DEEPINFER_TOKENIZER, else the prepared "
                  "DeepSeek-V4 one)");
  app->callback([opt] { run(*opt); });
}

}  // namespace

DI_CLI_COMMAND(kName, "Render a chat conversation (JSON on stdin) into the DeepSeek prompt", setup);

}  // namespace deepinfer::cli

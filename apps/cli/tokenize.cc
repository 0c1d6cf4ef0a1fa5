// `deepinfer tokenize`: UTF-8 text on stdin → token ids on stdout (one line, space-separated).
// --jsonl: every stdin line is a JSON string; every output line is the JSON array of its ids, so
// a large corpus runs in one process. Special-token matching is off unless --special: text that
// spells "<｜User｜>" stays ordinary text, the safe default for untrusted input.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "tokenize";

struct TokenizeOptions {
  std::string tokenizer_path;
  bool special = false;
  bool jsonl = false;
};

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& path) {
  auto tok = path.empty() ? Tokenizer::load_default() : Tokenizer::load(path);
  if (!tok.is_ok()) fail(kName, tok.status().message(), 2);
  return *tok;
}

void append_ids(std::string& out, const std::vector<int32_t>& ids, char separator) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.push_back(separator);
    out += std::to_string(ids[i]);
  }
}

void tokenize_all(const Tokenizer& tok, bool special) {
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  std::string out;
  append_ids(out, tok.encode(text, special), ' ');
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void tokenize_jsonl(const Tokenizer& tok, bool special) {
  std::string line;
  std::string out;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(kName, "stdin line " + std::to_string(line_no) + ": invalid JSON: " + e.what());
    }
    if (!value.is_string()) {
      fail(kName, "stdin line " + std::to_string(line_no) + ": expected a JSON string, got " +
                      std::string(value.type_name()));
    }
    out.push_back('[');
    append_ids(out, tok.encode(value.get_ref<const std::string&>(), special), ',');
    out += "]\n";
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void setup(CLI::App* app) {
  auto opt = std::make_shared<TokenizeOptions>();
  app->add_option(
      "--tokenizer", opt->tokenizer_path,
      "tokenizer.json (default: $DEEPINFER_TOKENIZER, else the prepared DeepSeek-V4 one)");
  app->add_flag("--special", opt->special, "turn text such as <｜User｜> into special-token ids");
  app->add_flag("--jsonl", opt->jsonl,
                "each stdin line is a JSON string; print a JSON id array per line");
  app->callback([opt] {
    std::ios::sync_with_stdio(false);
    const auto tok = load_tokenizer(opt->tokenizer_path);
    if (opt->jsonl) {
      tokenize_jsonl(*tok, opt->special);
    } else {
      tokenize_all(*tok, opt->special);
    }
  });
}

}  // namespace

DI_CLI_COMMAND(kName, "Print the token ids of UTF-8 text read from stdin", setup);

}  // namespace deepinfer::cli

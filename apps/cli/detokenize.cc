// `deepinfer detokenize`: token ids on stdin (space/newline separated) → the text they stand for,
// written as-is without a trailing newline. --jsonl: every stdin line is a JSON array of ids;
// every output line is the decoded text as a JSON string. Bad ids fail with a message naming the
// offending token and exit code 1; a tokenizer that cannot be loaded exits with 2.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "detokenize";

struct DetokenizeOptions {
  std::string tokenizer_path;
  bool jsonl = false;
  bool skip_special = false;
};

std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& path) {
  auto tok = path.empty() ? Tokenizer::load_default() : Tokenizer::load(path);
  if (!tok.is_ok()) fail(kName, tok.status().message(), 2);
  return *tok;
}

// `where` names the token for messages, e.g. "token 3" or "stdin line 2, element 5".
void check_id(const Tokenizer& tok, int64_t id, const std::string& where) {
  if (id < 0 || id >= tok.n_vocab()) {
    fail(kName, where + ": id " + std::to_string(id) +
                    " is out of range (the tokenizer has ids 0.." +
                    std::to_string(tok.n_vocab() - 1) + ")");
  }
  if (tok.token_bytes(static_cast<int32_t>(id)).empty()) {
    fail(kName, where + ": id " + std::to_string(id) + " is not assigned in this tokenizer");
  }
}

std::vector<int32_t> parse_ids_text(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (true) {
    pos = text.find_first_not_of(" \t\r\n", pos);
    if (pos == std::string::npos) break;
    const size_t end = std::min(text.find_first_of(" \t\r\n", pos), text.size());
    const std::string_view word(text.data() + pos, end - pos);
    const std::string where = "token " + std::to_string(ids.size() + 1);
    int64_t id = 0;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || ptr != word.data() + word.size()) {
      fail(kName, where + ": \"" + std::string(word.substr(0, 40)) + "\" is not an integer id");
    }
    check_id(tok, id, where);
    ids.push_back(static_cast<int32_t>(id));
    pos = end;
  }
  return ids;
}

std::vector<int32_t> parse_ids_json(const Tokenizer& tok, const std::string& line, size_t line_no) {
  const std::string where = "stdin line " + std::to_string(line_no);
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    fail(kName, where + ": invalid JSON: " + e.what());
  }
  if (!value.is_array()) fail(kName, where + ": expected a JSON array of ids");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string element = where + ", element " + std::to_string(i);
    if (!value[i].is_number_integer()) fail(kName, element + ": not an integer id");
    const int64_t id = value[i].is_number_unsigned() && value[i].get<uint64_t>() > INT64_MAX
                           ? -1
                           : value[i].get<int64_t>();
    check_id(tok, id, element);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void run(const DetokenizeOptions& opt) {
  std::ios::sync_with_stdio(false);
  const auto tok = load_tokenizer(opt.tokenizer_path);
  if (!opt.jsonl) {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const std::string out = tok->decode(parse_ids_text(*tok, text), opt.skip_special);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return;
  }
  std::string line;
  std::string out;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    const std::string text = tok->decode(parse_ids_json(*tok, line, line_no), opt.skip_special);
    // An id sequence may end inside a UTF-8 character; JSON needs valid UTF-8, hence replace.
    out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out.push_back('\n');
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void setup(CLI::App* app) {
  auto opt = std::make_shared<DetokenizeOptions>();
  app->add_option(
      "--tokenizer", opt->tokenizer_path,
      "tokenizer.json (default: $DEEPINFER_TOKENIZER, else the prepared DeepSeek-V4 one)");
  app->add_flag("--jsonl", opt->jsonl,
                "each stdin line is a JSON id array; print a JSON string per line");
  app->add_flag("--skip-special", opt->skip_special, "leave special tokens out of the text");
  app->callback([opt] { run(*opt); });
}

}  // namespace

DI_CLI_COMMAND(kName, "Print the text of token ids read from stdin", setup);

}  // namespace deepinfer::cli

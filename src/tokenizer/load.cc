// Tokenizer::load / load_default: file reading, the optional tokenizer_config.json beside the
// tokenizer.json (which names BOS/EOS), and the default data location. Errors name every path.
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace deepinfer {
namespace {

// DeepSeek's BOS/EOS texts: used when no tokenizer_config.json sits beside the file.
constexpr const char* kDefaultBos = "<｜begin▁of▁sentence｜>";
constexpr const char* kDefaultEos = "<｜end▁of▁sentence｜>";

// "bos_token" is either a string or an AddedToken object {"content": ...}.
std::string special_token_text(const nlohmann::json& config, const char* key,
                               const char* fallback) {
  if (!config.contains(key)) return fallback;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return fallback;
}

struct SpecialTexts {
  std::string bos = kDefaultBos;
  std::string eos = kDefaultEos;
};

Result<SpecialTexts> read_config(const std::string& tokenizer_path) {
  SpecialTexts texts;
  const std::string config_path =
      (std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json").string();
  if (!file_exists(config_path)) return texts;
  DI_ASSIGN_OR_RETURN(const std::string text, read_file(config_path));
  try {
    const auto config = nlohmann::json::parse(text);
    texts.bos = special_token_text(config, "bos_token", kDefaultBos);
    texts.eos = special_token_text(config, "eos_token", kDefaultEos);
  } catch (const nlohmann::json::exception& e) {
    return data_loss("{}: invalid JSON: {}", config_path, e.what());
  }
  return texts;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& tokenizer_json_path) {
  if (is_directory(tokenizer_json_path)) {
    return invalid_argument("{} is a directory; pass the path of a tokenizer.json",
                            tokenizer_json_path);
  }
  auto text = read_file(tokenizer_json_path);
  if (!text.is_ok()) return text.status().with_context("loading tokenizer");
  DI_ASSIGN_OR_RETURN(auto spec, tokenizer::parse_tokenizer_json(*text, tokenizer_json_path));
  DI_ASSIGN_OR_RETURN(auto specials, read_config(tokenizer_json_path));
  DI_ASSIGN_OR_RETURN(auto tok, tokenizer::BpeTokenizer::build(spec, tokenizer_json_path,
                                                               specials.bos, specials.eos));
  return std::shared_ptr<const Tokenizer>(std::move(tok));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load_default() {
  if (const char* env = std::getenv("DEEPINFER_TOKENIZER"); env != nullptr && *env != '\0') {
    auto tok = load(env);
    if (!tok.is_ok()) return tok.status().with_context("$DEEPINFER_TOKENIZER");
    return tok;
  }
  const std::string path = std::string(DI_SOURCE_DIR) + "/.cache/data/deepseek_v4/tokenizer.json";
  if (!file_exists(path)) {
    return not_found(
        "no tokenizer: $DEEPINFER_TOKENIZER is not set and {} does not exist; `./dev.sh build` "
        "(or tools/prepare_data.sh after `npm ci`) creates it, or pass a tokenizer.json path",
        path);
  }
  return load(path);
}

}  // namespace deepinfer

// tokenizer.json → TokenizerSpec (see tokenizer_json.h). The bulk (vocab, merges) is read by
// TokenizerJsonSax; the small rest is checked here on a DOM. nlohmann exceptions stay inside
// this file: every failure becomes a Status whose message starts with the file path.
#include "tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_json_sax.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::json;

// Context of one parse: builds messages "<path>: <json path>: <problem>".
struct Ctx {
  const std::string& path;
  Status unimplemented(const std::string& where, const std::string& what) const {
    return deepinfer::unimplemented("{}: {}: {} (only byte-level BPE tokenizers are supported)",
                                    path, where, what);
  }
  Status invalid(const std::string& where, const std::string& what) const {
    return data_loss("{}: {}: {}", path, where, what);
  }
};

bool is_null_or_missing(const Json& obj, const char* key) {
  return !obj.contains(key) || obj[key].is_null();
}

bool flag(const Json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_boolean() && obj[key].get<bool>();
}

std::string type_of(const Json& obj) {
  return obj.is_object() && obj.contains("type") && obj["type"].is_string()
             ? obj["type"].get<std::string>()
             : std::string("<no type>");
}

Status check_normalizer(const Json& root, const Ctx& ctx) {
  if (is_null_or_missing(root, "normalizer")) return Status::ok();
  const Json& n = root["normalizer"];
  if (type_of(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() &&
      n["normalizers"].empty()) {
    return Status::ok();
  }
  return ctx.unimplemented("normalizer", "type " + type_of(n));
}

Status parse_split(const Json& p, const std::string& where, const Ctx& ctx, TokenizerSpec* spec) {
  if (!p.contains("pattern") || !p["pattern"].is_object())
    return ctx.invalid(where, "missing \"pattern\"");
  const Json& pat = p["pattern"];
  SplitSpec split;
  if (pat.contains("Regex") && pat["Regex"].is_string()) {
    split.pattern = pat["Regex"].get<std::string>();
  } else if (pat.contains("String") && pat["String"].is_string()) {
    split.pattern = pat["String"].get<std::string>();
    split.is_regex = false;
  } else {
    return ctx.invalid(where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
  }
  const std::string behavior = p.value("behavior", std::string("<missing>"));
  if (behavior != "Isolated") return ctx.unimplemented(where, "Split behavior " + behavior);
  if (flag(p, "invert")) return ctx.unimplemented(where, "Split with invert=true");
  spec->splits.push_back(std::move(split));
  return Status::ok();
}

Status parse_pre_tokenizer(const Json& root, const Ctx& ctx, TokenizerSpec* spec) {
  if (is_null_or_missing(root, "pre_tokenizer")) return ctx.unimplemented("pre_tokenizer", "null");
  const Json& pre = root["pre_tokenizer"];
  std::vector<const Json*> steps;
  if (type_of(pre) == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
      return ctx.invalid("pre_tokenizer", "Sequence without a \"pretokenizers\" array");
    }
    for (const Json& p : pre["pretokenizers"]) steps.push_back(&p);
  } else {
    steps.push_back(&pre);
  }
  bool seen_byte_level = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Json& p = *steps[i];
    const std::string where = "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]";
    const std::string type = type_of(p);
    if (seen_byte_level) return ctx.unimplemented(where, type + " after ByteLevel");
    if (type == "Split") {
      DI_RETURN_IF_ERROR(parse_split(p, where, ctx, spec));
    } else if (type == "ByteLevel") {
      if (flag(p, "add_prefix_space"))
        return ctx.unimplemented(where, "ByteLevel add_prefix_space=true");
      if (p.value("use_regex", true)) return ctx.unimplemented(where, "ByteLevel use_regex=true");
      seen_byte_level = true;
    } else {
      return ctx.unimplemented(where, "pre-tokenizer type " + type);
    }
  }
  if (!seen_byte_level) return ctx.unimplemented("pre_tokenizer", "no ByteLevel step");
  return Status::ok();
}

Status parse_model(const Json& root, const Ctx& ctx, TokenizerSpec* spec) {
  if (is_null_or_missing(root, "model")) return ctx.invalid("model", "missing");
  const Json& model = root["model"];
  if (!model.is_object()) return ctx.invalid("model", "not an object");
  if (model.contains("type") && type_of(model) != "BPE") {
    return ctx.unimplemented("model", "type " + type_of(model));
  }
  if (!is_null_or_missing(model, "dropout")) return ctx.unimplemented("model", "BPE dropout");
  if (flag(model, "byte_fallback")) return ctx.unimplemented("model", "byte_fallback=true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!is_null_or_missing(model, key) && model[key] != "") {
      return ctx.unimplemented("model", std::string(key) + " is set");
    }
  }
  spec->ignore_merges = flag(model, "ignore_merges");
  // The entries themselves were read by TokenizerJsonSax; the DOM keeps empty placeholders.
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return ctx.invalid("model.vocab", "missing or not an object");
  if (!model.contains("merges") || !model["merges"].is_array())
    return ctx.invalid("model.merges", "missing or not an array");
  return Status::ok();
}

Status parse_added_tokens(const Json& root, const Ctx& ctx, TokenizerSpec* spec) {
  if (is_null_or_missing(root, "added_tokens")) return Status::ok();
  const Json& added = root["added_tokens"];
  if (!added.is_array()) return ctx.invalid("added_tokens", "not an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const Json& a = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string()) {
      return ctx.invalid(where, "expected an object with integer \"id\" and string \"content\"");
    }
    const int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id > INT32_MAX) return ctx.invalid(where, "id out of range");
    AddedTokenSpec t{static_cast<int32_t>(id), a["content"].get<std::string>(), flag(a, "special"),
                     flag(a, "lstrip"), flag(a, "rstrip")};
    if (t.content.empty()) return ctx.invalid(where, "empty content");
    if (flag(a, "single_word")) return ctx.unimplemented(where, "single_word=true");
    spec->added_tokens.push_back(std::move(t));
  }
  return Status::ok();
}

Status check_decoder(const Json& root, const Ctx& ctx) {
  if (is_null_or_missing(root, "decoder")) return ctx.unimplemented("decoder", "null");
  if (type_of(root["decoder"]) != "ByteLevel") {
    return ctx.unimplemented("decoder", "type " + type_of(root["decoder"]));
  }
  return Status::ok();
}

}  // namespace

Result<TokenizerSpec> parse_tokenizer_json(std::string_view json_text, const std::string& path) {
  const Ctx ctx{path};
  TokenizerSpec spec;
  try {
    TokenizerJsonSax sax(&spec);
    const bool parsed = Json::sax_parse(json_text, &sax);
    if (!parsed || !sax.error().empty()) {
      return data_loss("{}: {}", path,
                       sax.error().empty() ? "invalid tokenizer JSON" : sax.error());
    }
    const Json& root = sax.root();
    if (!root.is_object()) return data_loss("{}: not a JSON object", path);
    DI_RETURN_IF_ERROR(check_normalizer(root, ctx));
    DI_RETURN_IF_ERROR(parse_pre_tokenizer(root, ctx, &spec));
    DI_RETURN_IF_ERROR(parse_model(root, ctx, &spec));
    DI_RETURN_IF_ERROR(parse_added_tokens(root, ctx, &spec));
    DI_RETURN_IF_ERROR(check_decoder(root, ctx));
  } catch (const Json::exception& e) {
    // parse_error carries the byte offset; type errors the offending value.
    return data_loss("{}: invalid tokenizer JSON: {}", path, e.what());
  }
  return spec;
}

}  // namespace deepinfer::tokenizer

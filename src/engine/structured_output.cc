// StructuredOutputCompiler over the grammar engine's public API (include/deepinfer/grammar.h):
// JSON schema, regex, EBNF (GBNF / Lark subset), "any JSON object" ({"type": "object"}) and
// DSML tool calls (the JSON spec of engine.h, parsed here into compile_dsml's arguments).
// Builds without the grammar engine too (then every structured_output request fails at submit
// with UNIMPLEMENTED naming the field), so the engine never blocks on that module's progress.
#include "engine/structured_output.h"

#include <algorithm>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

#if __has_include("deepinfer/grammar.h")
#include "deepinfer/grammar.h"
#define DI_ENGINE_HAS_GRAMMAR 1
#endif

namespace deepinfer::engine {

#ifdef DI_ENGINE_HAS_GRAMMAR
namespace {

struct DsmlSpec {
  std::vector<DsmlToolSpec> tools;
  DsmlGrammarOptions options;
};

Status spec_error(const std::string& field, const std::string& what) {
  return invalid_argument("structured_output: DSML tool-call spec field '{}': {}", field, what);
}

Result<DsmlToolSpec> parse_dsml_tool(const nlohmann::ordered_json& tool, const std::string& path) {
  if (!tool.is_object()) return spec_error(path, "expected an object {\"name\", \"parameters\"}");
  DsmlToolSpec out;
  for (const auto& [key, value] : tool.items()) {
    if (key == "name" && value.is_string()) {
      out.name = value.get<std::string>();
    } else if (key == "parameters" && value.is_object()) {
      out.parameters_json = value.dump();
    } else if (key == "name" || key == "parameters") {
      return spec_error(path + "." + key, key == "name" ? "expected a string" : "expected a JSON schema object");
    } else {
      return spec_error(path + "." + key, "unknown field (expected name, parameters)");
    }
  }
  if (out.name.empty()) return spec_error(path + ".name", "required (a non-empty string)");
  return out;
}

// The kDsmlToolCalls spec of engine.h; unknown fields are errors (a misspelled "required" must
// not silently turn into an optional tool call). Ordered JSON: schema order is parameter order.
Result<DsmlSpec> parse_dsml_spec(const std::string& text) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument("structured_output: the DSML tool-call spec must be a JSON object");
  }
  DsmlSpec out;
  const std::pair<const char*, bool*> flags[] = {
      {"required", &out.options.tool_call_required}, {"thinking", &out.options.thinking},
      {"allow_content", &out.options.allow_content}, {"parallel_calls", &out.options.parallel_calls},
      {"v41_tags", &out.options.v41_tags}, {"any_order", &out.options.any_order}};
  for (const auto& [key, value] : j.items()) {
    if (key == "tools") {
      if (!value.is_array() || value.empty()) return spec_error("tools", "expected a non-empty array of tools");
      for (size_t i = 0; i < value.size(); ++i) {
        DI_ASSIGN_OR_RETURN(DsmlToolSpec tool, parse_dsml_tool(value[i], "tools[" + std::to_string(i) + "]"));
        out.tools.push_back(std::move(tool));
      }
      continue;
    }
    auto flag = std::find_if(std::begin(flags), std::end(flags), [&](const auto& f) { return key == f.first; });
    if (flag == std::end(flags)) {
      return spec_error(key, "unknown field (expected tools, required, thinking, allow_content, parallel_calls, "
                             "v41_tags, any_order)");
    }
    if (!value.is_boolean()) return spec_error(key, "expected true or false");
    *flag->second = value.get<bool>();
  }
  if (out.tools.empty()) return spec_error("tools", "required (a non-empty array of tools)");
  return out;
}

struct CompiledGrammarOutput final : CompiledStructuredOutput {
  std::shared_ptr<const Grammar> grammar;
};

class GrammarOutputMatcher final : public StructuredOutputMatcher {
 public:
  explicit GrammarOutputMatcher(std::shared_ptr<const Grammar> g) : matcher_(std::move(g)) {}
  Status fill_bitmask(std::span<uint32_t> words) override { return matcher_.fill_bitmask(words); }
  bool accept(int32_t token) override { return matcher_.accept(token); }
  bool is_terminated() const override { return matcher_.is_terminated(); }
  Status rollback(int32_t n) override { return matcher_.rollback(n); }

 private:
  GrammarMatcher matcher_;
};

// Requests that ask for the same structured output share one compiled grammar: its per-state
// token masks are built on first use and kept with it, so the second request with a schema or
// regex finds them built (a large automaton's masks are cached only with the grammar that built
// them: without this each request walked the vocabulary again for every state it reached,
// ~13 ms per step at 129K tokens for a counted repetition). Least recently used first out; a
// compiled grammar is immutable but for those caches, so sharing it leaks nothing between
// requests. Failed compiles are not kept (each request gets its own error).
class CompiledOutputCache {
 public:
  static constexpr size_t kCapacity = 32;  // grammars hold their masks: kept few

  std::shared_ptr<const CompiledStructuredOutput> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  // Returns the entry now cached under key (an equal compile that won a race is kept).
  std::shared_ptr<const CompiledStructuredOutput> put(const std::string& key,
                                                      std::shared_ptr<const CompiledStructuredOutput> value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) return it->second->second;
    lru_.emplace_front(key, std::move(value));
    index_.emplace(key, lru_.begin());
    if (lru_.size() > kCapacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second;
  }

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledStructuredOutput>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

class GrammarOutputCompiler final : public StructuredOutputCompiler {
 public:
  explicit GrammarOutputCompiler(std::shared_ptr<const GrammarCompiler> c) : compiler_(std::move(c)) {}

  Result<std::shared_ptr<const CompiledStructuredOutput>> compile(const StructuredOutput& spec) const override {
    std::string key = std::to_string(static_cast<int>(spec.kind));
    key += '\n';
    key += spec.spec;
    if (auto hit = cache_.find(key)) return hit;
    DI_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledStructuredOutput> compiled, compile_uncached(spec));
    return cache_.put(key, std::move(compiled));
  }

  std::unique_ptr<StructuredOutputMatcher> make_matcher(
      const std::shared_ptr<const CompiledStructuredOutput>& compiled) const override {
    const auto& g = static_cast<const CompiledGrammarOutput&>(*compiled);
    return std::make_unique<GrammarOutputMatcher>(g.grammar);
  }

 private:
  Result<std::shared_ptr<const CompiledStructuredOutput>> compile_uncached(const StructuredOutput& spec) const {
    Result<std::shared_ptr<const Grammar>> g = Status(StatusCode::kInternal, "unreachable");
    switch (spec.kind) {
      case StructuredOutput::Kind::kJsonSchema: g = compiler_->compile_json_schema(spec.spec); break;
      case StructuredOutput::Kind::kRegex: g = compiler_->compile_regex(spec.spec); break;
      case StructuredOutput::Kind::kEbnf: g = compiler_->compile_ebnf(spec.spec); break;
      case StructuredOutput::Kind::kJsonObject: g = compiler_->compile_json_schema(R"({"type": "object"})"); break;
      case StructuredOutput::Kind::kDsmlToolCalls: {
        DI_ASSIGN_OR_RETURN(DsmlSpec dsml, parse_dsml_spec(spec.spec));
        g = compiler_->compile_dsml(dsml.tools, dsml.options);
        break;
      }
    }
    if (!g.is_ok()) return Status(StatusCode::kInvalidArgument, g.status().message()).with_context("structured_output");
    auto out = std::make_shared<CompiledGrammarOutput>();
    out->grammar = std::move(g).value();
    return std::shared_ptr<const CompiledStructuredOutput>(std::move(out));
  }

  std::shared_ptr<const GrammarCompiler> compiler_;
  mutable CompiledOutputCache cache_;
};

}  // namespace

Result<std::unique_ptr<StructuredOutputCompiler>> StructuredOutputCompiler::create(
    std::shared_ptr<const Tokenizer> tokenizer, int32_t n_vocab) {
  auto compiler = GrammarCompiler::create(std::move(tokenizer), n_vocab);
  if (!compiler.is_ok()) return compiler.status().with_context("structured_output");
  return std::unique_ptr<StructuredOutputCompiler>(new GrammarOutputCompiler(std::move(compiler).value()));
}

#else

Result<std::unique_ptr<StructuredOutputCompiler>> StructuredOutputCompiler::create(std::shared_ptr<const Tokenizer>,
                                                                                  int32_t) {
  return unimplemented("structured_output: the grammar engine is not part of this build");
}

#endif

}  // namespace deepinfer::engine

// StructuredOutputCompiler over the grammar engine's public API (include/deepinfer/grammar.h):
// JSON schema, regex, EBNF (GBNF / Lark subset) and "any JSON object" ({"type": "object"}).
// Builds without the grammar engine too (then every structured_output request fails at submit
// with UNIMPLEMENTED naming the field), so the engine never blocks on that module's progress.
#include "engine/structured_output.h"

#include "base/status.h"

#if __has_include("deepinfer/grammar.h")
#include "deepinfer/grammar.h"
#define DI_ENGINE_HAS_GRAMMAR 1
#endif

namespace deepinfer::engine {

#ifdef DI_ENGINE_HAS_GRAMMAR
namespace {

struct CompiledGrammarOutput final : CompiledStructuredOutput {
  std::shared_ptr<const Grammar> grammar;
};

class GrammarOutputMatcher final : public StructuredOutputMatcher {
 public:
  explicit GrammarOutputMatcher(std::shared_ptr<const Grammar> g) : matcher_(std::move(g)) {}
  Status fill_bitmask(std::span<uint32_t> words) override { return matcher_.fill_bitmask(words); }
  bool accept(int32_t token) override { return matcher_.accept(token); }
  bool is_terminated() const override { return matcher_.is_terminated(); }

 private:
  GrammarMatcher matcher_;
};

class GrammarOutputCompiler final : public StructuredOutputCompiler {
 public:
  explicit GrammarOutputCompiler(std::shared_ptr<const GrammarCompiler> c) : compiler_(std::move(c)) {}

  Result<std::shared_ptr<const CompiledStructuredOutput>> compile(const StructuredOutput& spec) const override {
    Result<std::shared_ptr<const Grammar>> g = Status(StatusCode::kInternal, "unreachable");
    switch (spec.kind) {
      case StructuredOutput::Kind::kJsonSchema: g = compiler_->compile_json_schema(spec.spec); break;
      case StructuredOutput::Kind::kRegex: g = compiler_->compile_regex(spec.spec); break;
      case StructuredOutput::Kind::kEbnf: g = compiler_->compile_ebnf(spec.spec); break;
      case StructuredOutput::Kind::kJsonObject: g = compiler_->compile_json_schema(R"({"type": "object"})"); break;
    }
    if (!g.is_ok()) return Status(StatusCode::kInvalidArgument, g.status().message()).with_context("structured_output");
    auto out = std::make_shared<CompiledGrammarOutput>();
    out->grammar = std::move(g).value();
    return std::shared_ptr<const CompiledStructuredOutput>(std::move(out));
  }

  std::unique_ptr<StructuredOutputMatcher> make_matcher(
      const std::shared_ptr<const CompiledStructuredOutput>& compiled) const override {
    const auto& g = static_cast<const CompiledGrammarOutput&>(*compiled);
    return std::make_unique<GrammarOutputMatcher>(g.grammar);
  }

 private:
  std::shared_ptr<const GrammarCompiler> compiler_;
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

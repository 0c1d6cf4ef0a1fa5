// include/deepinfer/grammar.h: thin adapters from the public types to the grammar module
// (front ends -> grammar::Grammar -> CompiledGrammar; GrammarMatcher -> grammar::Matcher).
#include "deepinfer/grammar.h"

#include <chrono>

#include "deepinfer/tokenizer.h"
#include "grammar/dsml.h"
#include "grammar/ebnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/vocabulary.h"

namespace deepinfer {
namespace {

grammar::CompileLimits compile_limits(const GrammarLimits& l) {
  grammar::CompileLimits c;
  c.max_states = l.max_states;
  c.max_compile_ms = l.max_compile_ms;
  return c;
}

// The front ends share the compile budget (thread CPU time) with the automaton construction.
grammar::ThreadCpuClock::time_point deadline_of(const GrammarLimits& l) {
  return grammar::ThreadCpuClock::now() + std::chrono::microseconds(static_cast<int64_t>(l.max_compile_ms * 1000));
}

grammar::JsonSchemaOptions schema_options(const JsonSchemaGrammarOptions& p) {
  grammar::JsonSchemaOptions o;
  o.flexible_whitespace = p.flexible_whitespace;
  o.max_whitespace = p.max_whitespace;
  o.item_separator = p.item_separator;
  o.key_separator = p.key_separator;
  o.any_order = p.any_order;
  o.max_any_order_properties = p.max_any_order_properties;
  o.one_of_as_any_of = p.one_of_as_any_of;
  o.unknown_formats_are_annotations = p.unknown_formats_are_annotations;
  o.draft = static_cast<grammar::SchemaDraft>(p.draft);
  return o;
}

}  // namespace

double Grammar::compile_ms() const { return impl_->compile_ms(); }
int32_t Grammar::n_automaton_states() const { return impl_->n_states_total(); }

Result<std::shared_ptr<const GrammarCompiler>> GrammarCompiler::create(std::shared_ptr<const Tokenizer> tokenizer,
                                                                       int32_t n_tokens) {
  if (!tokenizer) return invalid_argument("grammar compiler: no tokenizer");
  DI_ASSIGN_OR_RETURN(auto vocab, grammar::Vocabulary::from_tokenizer(*tokenizer, n_tokens));
  auto c = std::shared_ptr<GrammarCompiler>(new GrammarCompiler());
  c->vocab_ = std::move(vocab);
  return std::shared_ptr<const GrammarCompiler>(std::move(c));
}

GrammarCompiler::~GrammarCompiler() = default;
int32_t GrammarCompiler::n_tokens() const { return vocab_->n_tokens(); }

Result<std::shared_ptr<const Grammar>> GrammarCompiler::build(grammar::Grammar&& g, const GrammarLimits& limits) const {
  DI_ASSIGN_OR_RETURN(auto compiled, grammar::CompiledGrammar::compile(std::move(g), vocab_, compile_limits(limits)));
  auto out = std::make_shared<Grammar>();
  out->impl_ = std::move(compiled);
  return std::shared_ptr<const Grammar>(std::move(out));
}

Result<std::shared_ptr<const Grammar>> GrammarCompiler::compile_regex(std::string_view pattern,
                                                                      const GrammarLimits& limits) const {
  grammar::Grammar g;
  DI_ASSIGN_OR_RETURN(grammar::NodeId body, grammar::parse_regex(pattern, g.ast, {}, grammar::raw_chars));
  g.root = g.add_rule("root", body);
  return build(std::move(g), limits);
}

Result<std::shared_ptr<const Grammar>> GrammarCompiler::compile_ebnf(std::string_view text, std::string_view root,
                                                                     const GrammarLimits& limits) const {
  grammar::EbnfOptions o;
  o.root = std::string(root);
  DI_ASSIGN_OR_RETURN(grammar::Grammar g, grammar::parse_ebnf(text, vocab_.get(), o));
  return build(std::move(g), limits);
}

Result<std::shared_ptr<const Grammar>> GrammarCompiler::compile_json_schema(std::string_view schema_json,
                                                                            const JsonSchemaGrammarOptions& options,
                                                                            const GrammarLimits& limits) const {
  grammar::JsonSchemaOptions o = schema_options(options);
  o.automata.deadline = deadline_of(limits);
  DI_ASSIGN_OR_RETURN(grammar::Grammar g, grammar::json_schema_to_grammar(schema_json, o));
  return build(std::move(g), limits);
}

Result<std::shared_ptr<const Grammar>> GrammarCompiler::compile_dsml(const std::vector<DsmlToolSpec>& tools,
                                                                     const DsmlGrammarOptions& options,
                                                                     const GrammarLimits& limits) const {
  std::vector<grammar::DsmlTool> specs;
  for (const DsmlToolSpec& t : tools) {
    grammar::Json params = grammar::Json::parse(t.parameters_json, nullptr, /*allow_exceptions=*/false);
    if (params.is_discarded()) return invalid_argument("tool '{}': parameters are not valid JSON", t.name);
    specs.push_back({t.name, std::move(params)});
  }
  grammar::DsmlOptions o;
  o.tool_choice = options.tool_call_required ? grammar::DsmlToolChoice::kRequired : grammar::DsmlToolChoice::kAuto;
  o.thinking = options.thinking;
  o.allow_content = options.allow_content;
  o.parallel_calls = options.parallel_calls;
  o.any_order = options.any_order;
  o.v41_tags = options.v41_tags;
  o.values.automata.deadline = deadline_of(limits);
  DI_ASSIGN_OR_RETURN(grammar::Grammar g, grammar::dsml_tool_call_grammar(specs, o, *vocab_));
  return build(std::move(g), limits);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : impl_(std::make_unique<grammar::Matcher>(grammar->impl_)) {}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

int32_t GrammarMatcher::bitmask_words() const { return impl_->n_words(); }
Status GrammarMatcher::fill_bitmask(std::span<uint32_t> bitmask) { return impl_->fill_bitmask(bitmask); }
bool GrammarMatcher::accept(int32_t token) { return impl_->accept(token); }
Status GrammarMatcher::rollback(int32_t n) { return impl_->rollback(n); }
void GrammarMatcher::reset() { impl_->reset(); }
std::string GrammarMatcher::find_jump_forward_string() { return impl_->find_jump_forward_string(); }
bool GrammarMatcher::can_terminate() const { return impl_->can_terminate(); }
bool GrammarMatcher::is_terminated() const { return impl_->is_terminated(); }
int32_t GrammarMatcher::n_accepted() const { return impl_->n_accepted(); }

Status fill_bitmasks(std::span<GrammarMatcher* const> matchers, std::span<uint32_t> rows, int32_t row_words) {
  if (row_words <= 0 || rows.size() < matchers.size() * static_cast<size_t>(row_words)) {
    return invalid_argument("grammar bitmask rows: {} words for {} rows of {}", rows.size(), matchers.size(), row_words);
  }
  for (size_t r = 0; r < matchers.size(); ++r) {
    std::span<uint32_t> row = rows.subspan(r * static_cast<size_t>(row_words), static_cast<size_t>(row_words));
    if (matchers[r] == nullptr) {
      std::fill(row.begin(), row.end(), ~0u);
      continue;
    }
    DI_RETURN_IF_ERROR(matchers[r]->fill_bitmask(row).with_context("row " + std::to_string(r)));
  }
  return Status::ok();
}

}  // namespace deepinfer

// Public API of structured outputs: compile a regex, an EBNF grammar (GBNF or a Lark-style
// subset), a JSON schema or a DeepSeek DSML tool-call spec against the model vocabulary, then
// constrain decoding with a per-request GrammarMatcher that fills a token bitmask each step.
//
// Thread-safety: a GrammarCompiler and a compiled Grammar are immutable and may be shared by any
// number of threads and requests (internal mask caches are synchronized). A GrammarMatcher
// belongs to one request and is not thread-safe; matchers of different requests may run on
// different threads at the same time.
//
// Sampler integration (one row per request in a batch; bitmask layout: bit i of word i/32 set
// means token i is allowed; a row has bitmask_words() = ceil(n_tokens / 32) words):
//   GrammarMatcher m(grammar);                         // at request admission
//   each step:  m.fill_bitmask(row);                   // before sampling (CPU, may overlap the forward)
//               token = sample(logits masked by row);  // the sampler sets cleared bits to -inf
//               m.accept(token);                       // false = the token broke the grammar
//               if (m.is_terminated()) finish;         // EOS was accepted
//   EOS is allowed in the mask exactly when the grammar can end here; ids past the tokenizer's
//   vocabulary (unused embedding rows) are never allowed; special tokens only where the grammar
//   names them (EBNF <[id]>/<text>, DSML markers).
// Speculative decoding: accept the draft tokens one by one, filling a row before each (rows for
// the draft positions and the bonus position); stop at the first token accept() refuses; after
// verification rollback(n_rejected). Jump-forward: find_jump_forward_string() returns the bytes
// the grammar forces next; tokenize them and accept() the tokens (or feed them as draft tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/status.h"

namespace deepinfer {

class Tokenizer;
namespace grammar {
struct Grammar;
class CompiledGrammar;
class Matcher;
class Vocabulary;
}  // namespace grammar

struct GrammarLimits {
  int64_t max_states = 500'000;  // automaton states over the whole grammar
  double max_compile_ms = 250.0; // compile budget in CPU time of the compiling thread; past it compilation fails
};

enum class JsonSchemaDraft : uint8_t { kAuto, kDraft4, kDraft7, k2020 };

struct JsonSchemaGrammarOptions {
  bool flexible_whitespace = false;  // else no whitespace at all between tokens
  int32_t max_whitespace = 20;       // flexible: at most this many whitespace bytes per gap
  std::string item_separator = ",";  // compact mode separators (", " / ": " = Python style)
  std::string key_separator = ":";
  bool any_order = false;            // properties in any order (else schema order)
  int32_t max_any_order_properties = 10;
  bool one_of_as_any_of = false;     // accept oneOf that cannot be proven exclusive
  // An unknown "format" is an annotation (ignored), as the JSON Schema default; false (strict):
  // a compile error naming it. Known formats are always enforced.
  bool unknown_formats_are_annotations = true;
  JsonSchemaDraft draft = JsonSchemaDraft::kAuto;  // kAuto: from "$schema", default 2020-12
};

struct DsmlToolSpec {
  std::string name;
  std::string parameters_json = "{}";  // JSON schema of the arguments object
};

struct DsmlGrammarOptions {
  bool tool_call_required = false;  // else the tool-call block is optional
  bool thinking = false;            // output starts with reasoning closed by </think>
  bool allow_content = true;        // text before the tool-call block
  bool parallel_calls = true;
  bool any_order = true;            // parameters in any order
  bool v41_tags = false;            // DeepSeek-V4.1 tag spelling
};

// A compiled grammar. Opaque; obtained from GrammarCompiler.
class Grammar {
 public:
  double compile_ms() const;
  int32_t n_automaton_states() const;

 private:
  friend class GrammarCompiler;
  friend class GrammarMatcher;
  std::shared_ptr<const grammar::CompiledGrammar> impl_;
};

class GrammarCompiler {
 public:
  // n_tokens: the bitmask width (the model's vocabulary rows, e.g. 129,280); 0 = the tokenizer's
  // size. Building the vocabulary index takes ~0.1 s: create one compiler per tokenizer.
  static Result<std::shared_ptr<const GrammarCompiler>> create(std::shared_ptr<const Tokenizer> tokenizer,
                                                               int32_t n_tokens = 0);
  ~GrammarCompiler();

  // The whole output must match `pattern` (ECMAScript subset; ^/$ at the ends are optional).
  Result<std::shared_ptr<const Grammar>> compile_regex(std::string_view pattern,
                                                       const GrammarLimits& limits = {}) const;
  // GBNF (`root ::= ...`) or Lark-style (`start: ...`); `root` overrides the start rule name.
  Result<std::shared_ptr<const Grammar>> compile_ebnf(std::string_view text, std::string_view root = {},
                                                      const GrammarLimits& limits = {}) const;
  // Errors name the unsupported keyword or construct and its JSON path.
  Result<std::shared_ptr<const Grammar>> compile_json_schema(std::string_view schema_json,
                                                             const JsonSchemaGrammarOptions& options = {},
                                                             const GrammarLimits& limits = {}) const;
  Result<std::shared_ptr<const Grammar>> compile_dsml(const std::vector<DsmlToolSpec>& tools,
                                                      const DsmlGrammarOptions& options = {},
                                                      const GrammarLimits& limits = {}) const;

  int32_t n_tokens() const;
  int32_t bitmask_words() const { return (n_tokens() + 31) / 32; }

 private:
  GrammarCompiler() = default;
  Result<std::shared_ptr<const Grammar>> build(grammar::Grammar&& g, const GrammarLimits& limits) const;
  std::shared_ptr<const grammar::Vocabulary> vocab_;
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  int32_t bitmask_words() const;
  // Fills `bitmask` (at least bitmask_words() words; extra words are zeroed) for the next token.
  Status fill_bitmask(std::span<uint32_t> bitmask);
  // Advances over `token`; returns false and leaves the state unchanged if it is not allowed.
  bool accept(int32_t token);
  // Undoes the last n accepted tokens (n <= n_accepted()).
  Status rollback(int32_t n);
  void reset();
  // Bytes the grammar forces next, up to the first choice or possible end.
  std::string find_jump_forward_string();
  // EOS would be accepted now.
  bool can_terminate() const;
  // EOS has been accepted.
  bool is_terminated() const;
  int32_t n_accepted() const;

 private:
  std::unique_ptr<grammar::Matcher> impl_;
};

// Fills one bitmask row per matcher (row r = rows[r * row_words, (r + 1) * row_words)); a null
// matcher gets an all-ones row (unconstrained request).
Status fill_bitmasks(std::span<GrammarMatcher* const> matchers, std::span<uint32_t> rows, int32_t row_words);

}  // namespace deepinfer

// JSON string automata. Constrained strings (pattern, length, format, literal keys and enum
// members) use the canonical encoding, so each decoded string has exactly one spelling and
// complement/intersection are exact: characters raw (UTF-8) except '"' -> \" , '\' -> \\ and
// control characters -> \b \f \n \r \t or \u00xx (lowercase hex) — what nlohmann::json::dump()
// and Python json.dumps(ensure_ascii=False) emit. Unconstrained strings accept every escape.
// Lengths count code points, as JSON schema does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/ast.h"
#include "grammar/dfa.h"

namespace deepinfer::grammar {

// CharMapper: the canonical JSON encodings of the code points of `set`.
NodeId json_chars(Ast& ast, const CodepointSet& set);

struct StringSpec {
  int64_t min_length = 0;
  int64_t max_length = -1;  // -1: unbounded
  std::vector<std::string> patterns;  // ECMAScript, unanchored (JSON-schema semantics)
  std::vector<std::string> formats;
  bool raw = false;  // raw UTF-8 text without quotes or escapes (DSML string parameters)
};

struct StringLimits {
  int64_t max_length_bound = 10'000;  // largest enforceable minLength/maxLength
};

// Quoted canonical JSON strings satisfying `spec` (raw text when spec.raw); errors name `what`
// and the offending part.
// Built automata are cached process-wide by spec.
Result<std::shared_ptr<const Dfa>> string_dfa(const StringSpec& spec, const AutomatonLimits& limits,
                                              const StringLimits& string_limits, const std::string& what);
// Any quoted JSON string, every escape allowed (\/, \uXXXX, ...).
const Dfa& free_string_dfa();
// Any quoted canonical JSON string.
const Dfa& canonical_string_dfa();
// Canonical JSON text of a UTF-8 string, quotes included.
std::string json_quote(std::string_view utf8);
// The regex (on the decoded string, full match) of a supported format, or an error naming it.
Result<std::string> format_regex(std::string_view format);

}  // namespace deepinfer::grammar

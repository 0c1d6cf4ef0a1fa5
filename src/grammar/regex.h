// ECMAScript-subset regular expressions (the dialect of JSON-schema "pattern"): literals, classes
// and negated classes, escapes \d \w \s \D \W \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} \cX,
// '.', groups (capturing, (?:...), named), alternation, quantifiers * + ? {n} {n,} {n,m} (lazy
// forms accepted: same language), ^ and $ at the ends of alternatives. Backreferences,
// lookaround, \b/\B, \p{...} and inline flags are compile errors naming the construct.
// Code-point classes go through a CharMapper, so the same parser serves raw-output regexes and
// JSON string contents (where characters must be emitted in escaped form).
#pragma once

#include <functional>
#include <string_view>

#include "base/status.h"
#include "grammar/ast.h"

namespace deepinfer::grammar {

using CharMapper = std::function<NodeId(Ast&, const CodepointSet&)>;

struct RegexOptions {
  // true: JSON-schema semantics, the pattern may match anywhere unless anchored with ^ / $.
  // false: the whole text must match (^ and $ at the ends are accepted and change nothing).
  bool search = false;
};

Result<NodeId> parse_regex(std::string_view pattern, Ast& ast, const RegexOptions& options,
                           const CharMapper& mapper);

// The default mapper: UTF-8 encoded code points.
NodeId raw_chars(Ast& ast, const CodepointSet& set);

}  // namespace deepinfer::grammar

// EBNF front end. Two surface syntaxes, told apart by the rule operator:
//  * GBNF (llama.cpp): `name ::= alt | alt`, "literals", [classes], [^negated], '.', ( groups ),
//    * + ? {m} {m,} {m,n} {,n}, # comments, token terminals <[id]> and <text-of-special-token>;
//    start rule `root`.
//  * Lark-style subset: `name: alt | alt` (also ?name and TERMINAL names), "literal" (with the i
//    flag), /regex/, "a".."z" ranges, [optional], ( groups ), * + ?, ~ n and ~ n..m, // comments;
//    start rule `start`. Directives (%import, %ignore, ...) are compile errors naming them.
// Recursive rules are fine; direct left recursion is rewritten by the grammar compiler, other
// left recursion is a compile error.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

class Vocabulary;

struct EbnfOptions {
  std::string root;  // start rule; empty = "root" (GBNF) or "start" (Lark)
};

// `vocab` resolves <special> token terminals (may be null: then they are errors).
Result<Grammar> parse_ebnf(std::string_view text, const Vocabulary* vocab, const EbnfOptions& options = {});

}  // namespace deepinfer::grammar

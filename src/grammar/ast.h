// Grammar expression trees shared by every front end (regex, EBNF, JSON schema, DSML): bytes,
// code-point classes, concatenation, alternation, bounded repetition, calls to other rules,
// token terminals (one vocabulary id, e.g. a special token), embedded precompiled DFAs and the two
// JSON-object list forms (separated sequence, any-order permutation). Nodes live in an arena and
// are referenced by NodeId; the arena is append-only, so ids stay valid while it is built.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/charset.h"

namespace deepinfer::grammar {

class Dfa;
using NodeId = int32_t;
inline constexpr int32_t kUnbounded = -1;

enum class Op : uint8_t {
  kEmpty,        // matches the empty string
  kNothing,      // matches nothing
  kBytes,        // one byte in [lo, hi]
  kChars,        // one code point of charset(a), UTF-8 encoded
  kConcat,       // kids in order
  kAlt,          // any kid
  kRepeat,       // kids[0] repeated a..b times (b = kUnbounded for no upper bound)
  kRule,         // call of rule a
  kToken,        // the single vocabulary token a (matched by id, not by bytes)
  kDfa,          // the leaf automaton dfa(a), embedded
  kSeparated,    // kids in order, each present iff required or chosen, joined by separator b;
                 // with has_extra the last kid is an extra item repeatable after the others
  kPermutation,  // like kSeparated but the (non-extra) items may come in any order
};

struct Node {
  Op op = Op::kEmpty;
  uint8_t lo = 0;
  uint8_t hi = 0;
  bool has_extra = false;
  int32_t a = 0;
  int32_t b = 0;
  std::vector<NodeId> kids;
  std::vector<uint8_t> required;  // kSeparated / kPermutation: one flag per non-extra item
  int32_t min_count = 0;          // kSeparated / kPermutation: bounds on the number of present
  int32_t max_count = kUnbounded; // items (extras included)
};

class Ast {
 public:
  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const CodepointSet& charset(int32_t index) const { return charsets_[static_cast<size_t>(index)]; }
  const std::shared_ptr<const Dfa>& dfa(int32_t index) const { return dfas_[static_cast<size_t>(index)]; }
  size_t n_nodes() const { return nodes_.size(); }

  NodeId empty();
  NodeId nothing();
  NodeId byte_range(uint8_t lo, uint8_t hi);
  NodeId byte(uint8_t b) { return byte_range(b, b); }
  NodeId literal(std::string_view bytes);  // exact bytes
  NodeId chars(CodepointSet set);          // kNothing if the set is empty
  NodeId concat(std::vector<NodeId> kids);
  NodeId alt(std::vector<NodeId> kids);
  NodeId repeat(NodeId kid, int32_t min, int32_t max);
  NodeId optional(NodeId kid) { return repeat(kid, 0, 1); }
  NodeId star(NodeId kid) { return repeat(kid, 0, kUnbounded); }
  NodeId plus(NodeId kid) { return repeat(kid, 1, kUnbounded); }
  NodeId rule(int32_t rule_id);
  NodeId token(int32_t token_id);
  NodeId dfa(std::shared_ptr<const Dfa> automaton);
  // items[i] is present iff required[i] or chosen; `separator` (may be -1) between present items.
  NodeId separated(std::vector<NodeId> items, std::vector<uint8_t> required, NodeId separator,
                   NodeId extra = -1, int32_t min_count = 0, int32_t max_count = kUnbounded);
  NodeId permutation(std::vector<NodeId> items, std::vector<uint8_t> required, NodeId separator,
                     NodeId extra = -1, int32_t min_count = 0, int32_t max_count = kUnbounded);

  // Copies the subtree `id` of `other` into this arena (rule ids are kept as they are).
  NodeId import(const Ast& other, NodeId id);

 private:
  NodeId add(Node n);
  std::vector<Node> nodes_;
  std::vector<CodepointSet> charsets_;
  std::vector<std::shared_ptr<const Dfa>> dfas_;
};

}  // namespace deepinfer::grammar

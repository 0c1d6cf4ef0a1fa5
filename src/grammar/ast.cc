// Ast builders. They fold the trivial cases (empty/nothing operands, single-kid lists, nested
// concatenations) so front ends can build naively without producing needless automaton states.
#include "grammar/ast.h"

#include "base/check.h"

namespace deepinfer::grammar {

NodeId Ast::add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Ast::empty() { return add(Node{}); }

NodeId Ast::nothing() {
  Node n;
  n.op = Op::kNothing;
  return add(std::move(n));
}

NodeId Ast::byte_range(uint8_t lo, uint8_t hi) {
  Node n;
  n.op = Op::kBytes;
  n.lo = lo;
  n.hi = hi;
  return add(std::move(n));
}

NodeId Ast::literal(std::string_view bytes) {
  std::vector<NodeId> kids;
  kids.reserve(bytes.size());
  for (char c : bytes) kids.push_back(byte(static_cast<uint8_t>(c)));
  return concat(std::move(kids));
}

NodeId Ast::chars(CodepointSet set) {
  if (set.empty()) return nothing();
  const auto& r = set.ranges();
  if (r.size() == 1 && r[0].second < 0x80) {
    return byte_range(static_cast<uint8_t>(r[0].first), static_cast<uint8_t>(r[0].second));
  }
  charsets_.push_back(std::move(set));
  Node n;
  n.op = Op::kChars;
  n.a = static_cast<int32_t>(charsets_.size() - 1);
  return add(std::move(n));
}

NodeId Ast::concat(std::vector<NodeId> kids) {
  Node n;
  n.op = Op::kConcat;
  for (NodeId k : kids) {
    const Node& kn = node(k);
    if (kn.op == Op::kNothing) return nothing();
    if (kn.op == Op::kEmpty) continue;
    if (kn.op == Op::kConcat) {
      n.kids.insert(n.kids.end(), kn.kids.begin(), kn.kids.end());
    } else {
      n.kids.push_back(k);
    }
  }
  if (n.kids.empty()) return empty();
  if (n.kids.size() == 1) return n.kids[0];
  return add(std::move(n));
}

NodeId Ast::alt(std::vector<NodeId> kids) {
  Node n;
  n.op = Op::kAlt;
  for (NodeId k : kids) {
    const Node& kn = node(k);
    if (kn.op == Op::kNothing) continue;
    if (kn.op == Op::kAlt) {
      n.kids.insert(n.kids.end(), kn.kids.begin(), kn.kids.end());
    } else {
      n.kids.push_back(k);
    }
  }
  if (n.kids.empty()) return nothing();
  if (n.kids.size() == 1) return n.kids[0];
  return add(std::move(n));
}

NodeId Ast::repeat(NodeId kid, int32_t min, int32_t max) {
  DI_CHECK(min >= 0 && (max == kUnbounded || max >= min), "bad repeat {}..{}", min, max);
  const Node& kn = node(kid);
  if (max == 0) return empty();
  if (kn.op == Op::kNothing) return min == 0 ? empty() : nothing();
  if (kn.op == Op::kEmpty) return empty();
  if (min == 1 && max == 1) return kid;
  Node n;
  n.op = Op::kRepeat;
  n.a = min;
  n.b = max;
  n.kids = {kid};
  return add(std::move(n));
}

NodeId Ast::rule(int32_t rule_id) {
  Node n;
  n.op = Op::kRule;
  n.a = rule_id;
  return add(std::move(n));
}

NodeId Ast::token(int32_t token_id) {
  Node n;
  n.op = Op::kToken;
  n.a = token_id;
  return add(std::move(n));
}

NodeId Ast::dfa(std::shared_ptr<const Dfa> automaton) {
  dfas_.push_back(std::move(automaton));
  Node n;
  n.op = Op::kDfa;
  n.a = static_cast<int32_t>(dfas_.size() - 1);
  return add(std::move(n));
}

NodeId Ast::separated(std::vector<NodeId> items, std::vector<uint8_t> required, NodeId separator,
                      NodeId extra, int32_t min_count, int32_t max_count) {
  DI_CHECK(items.size() == required.size());
  Node n;
  n.op = Op::kSeparated;
  n.kids = std::move(items);
  n.required = std::move(required);
  n.b = separator;
  n.min_count = min_count;
  n.max_count = max_count;
  if (extra >= 0) {
    n.kids.push_back(extra);
    n.has_extra = true;
  }
  return add(std::move(n));
}

NodeId Ast::permutation(std::vector<NodeId> items, std::vector<uint8_t> required,
                        NodeId separator, NodeId extra, int32_t min_count, int32_t max_count) {
  NodeId id = separated(std::move(items), std::move(required), separator, extra, min_count, max_count);
  nodes_[static_cast<size_t>(id)].op = Op::kPermutation;
  return id;
}

NodeId Ast::import(const Ast& other, NodeId id) {
  Node n = other.node(id);
  switch (n.op) {
    case Op::kChars:
      charsets_.push_back(other.charset(n.a));
      n.a = static_cast<int32_t>(charsets_.size() - 1);
      break;
    case Op::kDfa:
      dfas_.push_back(other.dfa(n.a));
      n.a = static_cast<int32_t>(dfas_.size() - 1);
      break;
    default:
      break;
  }
  for (NodeId& k : n.kids) k = import(other, k);
  if ((n.op == Op::kSeparated || n.op == Op::kPermutation) && n.b >= 0) n.b = import(other, n.b);
  return add(std::move(n));
}

}  // namespace deepinfer::grammar

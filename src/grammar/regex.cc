// Regex parser: pattern text -> small regex tree (classes, sequences, alternatives, repeats,
// anchors) -> Ast, with anchors resolved at the ends of top-level alternatives.
#include "grammar/regex.h"

#include <cctype>
#include <string>

#include "base/status.h"

namespace deepinfer::grammar {
namespace {

constexpr int32_t kMaxRepeat = 100'000;

struct RNode {
  enum Kind { kChars, kSeq, kAlt, kRepeat, kBol, kEol } kind = kSeq;
  CodepointSet set;
  std::vector<RNode> kids;
  int32_t min = 0, max = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view pattern) : p_(pattern) {}

  Result<RNode> parse() {
    DI_ASSIGN_OR_RETURN(RNode n, parse_alt());
    if (pos_ < p_.size()) return error("unbalanced ')'");
    return n;
  }

 private:
  Status error(const std::string& what) const {
    return invalid_argument("regex /{}/: {} at offset {}", p_, what, pos_);
  }
  bool eof() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }
  bool consume(char c) {
    if (!eof() && p_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  Result<uint32_t> next_codepoint() {
    uint32_t cp;
    size_t pos = pos_;
    if (!decode_utf8(p_, pos, cp)) return error("invalid UTF-8");
    pos_ = pos;
    return cp;
  }

  Result<RNode> parse_alt();
  Result<RNode> parse_seq();
  Result<RNode> parse_atom();
  Status parse_quantifier(RNode& atom, bool& found);
  Result<CodepointSet> parse_class();
  // One escape after '\'; returns a set (single code point or class).
  Result<CodepointSet> parse_escape(bool in_class);
  Result<uint32_t> parse_hex(int digits);

  std::string p_;
  size_t pos_ = 0;
};

Result<RNode> Parser::parse_alt() {
  RNode alt;
  alt.kind = RNode::kAlt;
  DI_ASSIGN_OR_RETURN(RNode first, parse_seq());
  alt.kids.push_back(std::move(first));
  while (consume('|')) {
    DI_ASSIGN_OR_RETURN(RNode next, parse_seq());
    alt.kids.push_back(std::move(next));
  }
  if (alt.kids.size() == 1) return std::move(alt.kids[0]);
  return alt;
}

Result<RNode> Parser::parse_seq() {
  RNode seq;
  seq.kind = RNode::kSeq;
  while (!eof() && peek() != '|' && peek() != ')') {
    DI_ASSIGN_OR_RETURN(RNode atom, parse_atom());
    bool quantified = false;
    DI_RETURN_IF_ERROR(parse_quantifier(atom, quantified));
    seq.kids.push_back(std::move(atom));
  }
  return seq;
}

Status Parser::parse_quantifier(RNode& atom, bool& found) {
  if (eof()) return Status::ok();
  int32_t min = -1, max = -1;
  const size_t save = pos_;
  if (consume('*')) { min = 0; max = kUnbounded; }
  else if (consume('+')) { min = 1; max = kUnbounded; }
  else if (consume('?')) { min = 0; max = 1; }
  else if (consume('{')) {
    auto number = [&](int32_t& out) {
      const size_t start = pos_;
      int64_t v = 0;
      while (!eof() && peek() >= '0' && peek() <= '9') { v = std::min<int64_t>(v * 10 + (peek() - '0'), int64_t{1} << 40); ++pos_; }
      out = static_cast<int32_t>(std::min<int64_t>(v, kMaxRepeat + 1));
      return pos_ > start;
    };
    if (number(min)) {
      if (consume('}')) max = min;
      else if (consume(',')) {
        if (consume('}')) max = kUnbounded;
        else if (!number(max) || !consume('}')) { pos_ = save; return Status::ok(); }
      } else { pos_ = save; return Status::ok(); }
    } else {
      pos_ = save;  // Annex B: a '{' that is not a quantifier is a literal
      return Status::ok();
    }
  } else {
    return Status::ok();
  }
  consume('?');  // lazy form: same language
  if (atom.kind == RNode::kBol || atom.kind == RNode::kEol) return error("quantified anchor");
  if (min > kMaxRepeat || max > kMaxRepeat) return error("repeat count above 100000");
  if (max != kUnbounded && max < min) return error("quantifier {n,m} with m < n");
  if (!eof() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
    return error("nested quantifier");
  }
  RNode rep;
  rep.kind = RNode::kRepeat;
  rep.min = min;
  rep.max = max;
  rep.kids.push_back(std::move(atom));
  atom = std::move(rep);
  found = true;
  return Status::ok();
}

Result<RNode> Parser::parse_atom() {
  RNode n;
  n.kind = RNode::kChars;
  const char c = peek();
  if (c == '(') {
    ++pos_;
    if (consume('?')) {
      if (consume(':')) {
      } else if (p_.compare(pos_, 2, "<=") == 0 || p_.compare(pos_, 2, "<!") == 0) {
        return error("lookbehind (?<=...) / (?<!...) is not supported");
      } else if (consume('<')) {
        while (!eof() && peek() != '>') ++pos_;
        if (!consume('>')) return error("unterminated group name");
      } else if (!eof() && (peek() == '=' || peek() == '!')) {
        return error("lookahead (?=...) / (?!...) is not supported");
      } else {
        return error("inline flags or unknown group (?...) are not supported");
      }
    }
    DI_ASSIGN_OR_RETURN(RNode inner, parse_alt());
    if (!consume(')')) return error("missing ')'");
    return inner;
  }
  if (c == ')') return error("unbalanced ')'");
  if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
  if (c == '^') { ++pos_; n.kind = RNode::kBol; return n; }
  if (c == '$') { ++pos_; n.kind = RNode::kEol; return n; }
  if (c == '.') { ++pos_; n.set = CodepointSet::dot(); return n; }
  if (c == '[') {
    DI_ASSIGN_OR_RETURN(n.set, parse_class());
    return n;
  }
  if (c == '\\') {
    ++pos_;
    DI_ASSIGN_OR_RETURN(n.set, parse_escape(false));
    return n;
  }
  DI_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
  n.set = CodepointSet::single(cp);
  return n;
}

Result<uint32_t> Parser::parse_hex(int digits) {
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i) {
    if (eof() || !std::isxdigit(static_cast<unsigned char>(peek()))) return error("bad hex escape");
    const char h = peek();
    v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    ++pos_;
  }
  return v;
}

Result<CodepointSet> Parser::parse_escape(bool in_class) {
  if (eof()) return error("trailing backslash");
  const char c = p_[pos_++];
  switch (c) {
    case 'd': return CodepointSet::digit();
    case 'D': return CodepointSet::digit().negated();
    case 'w': return CodepointSet::word();
    case 'W': return CodepointSet::word().negated();
    case 's': return CodepointSet::space();
    case 'S': return CodepointSet::space().negated();
    case 't': return CodepointSet::single('\t');
    case 'n': return CodepointSet::single('\n');
    case 'r': return CodepointSet::single('\r');
    case 'f': return CodepointSet::single('\f');
    case 'v': return CodepointSet::single('\v');
    case '0':
      if (!eof() && peek() >= '0' && peek() <= '9') return error("octal escape is not supported");
      return CodepointSet::single(0);
    case 'b':
      if (in_class) return CodepointSet::single('\b');
      return error("word boundary \\b is not supported");
    case 'B': return error("word boundary \\B is not supported");
    case 'c': {
      if (eof() || !std::isalpha(static_cast<unsigned char>(peek()))) return error("bad \\c escape");
      return CodepointSet::single(static_cast<uint32_t>(p_[pos_++]) % 32);
    }
    case 'x': {
      DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(2));
      return CodepointSet::single(v);
    }
    case 'u': {
      if (consume('{')) {
        uint32_t v = 0;
        int n = 0;
        while (!eof() && peek() != '}') {
          DI_ASSIGN_OR_RETURN(uint32_t d, parse_hex(1));
          v = v * 16 + d;
          if (++n > 6 || v > kMaxCodepoint) return error("\\u{...} escape out of range");
        }
        if (!consume('}') || n == 0) return error("bad \\u{...} escape");
        return CodepointSet::single(v);
      }
      DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(4));
      // A surrogate pair written as two escapes is one code point.
      if (v >= 0xD800 && v <= 0xDBFF && p_.compare(pos_, 2, "\\u") == 0) {
        const size_t save = pos_;
        pos_ += 2;
        auto lo = parse_hex(4);
        if (lo.is_ok() && *lo >= 0xDC00 && *lo <= 0xDFFF) {
          return CodepointSet::single(0x10000 + ((v - 0xD800) << 10) + (*lo - 0xDC00));
        }
        pos_ = save;
      }
      if (v >= 0xD800 && v <= 0xDFFF) return error("lone surrogate escape");
      return CodepointSet::single(v);
    }
    case 'p':
    case 'P': return error("unicode property escapes \\p{...} are not supported");
    case 'k': return error("named backreference \\k<...> is not supported");
    default: break;
  }
  if (c >= '1' && c <= '9') return error("backreference \\" + std::string(1, c) + " is not supported");
  if (std::isalnum(static_cast<unsigned char>(c))) return error("unknown escape \\" + std::string(1, c));
  --pos_;
  DI_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
  return CodepointSet::single(cp);
}

Result<CodepointSet> Parser::parse_class() {
  ++pos_;  // '['
  const bool negate = consume('^');
  CodepointSet set;
  bool first = true;
  while (true) {
    if (eof()) return error("unterminated character class");
    if (peek() == ']' && !first) { ++pos_; break; }
    if (peek() == ']' && first) { ++pos_; break; }  // '[]' matches nothing, '[^]' anything
    first = false;
    CodepointSet lo_set;
    if (consume('\\')) {
      DI_ASSIGN_OR_RETURN(lo_set, parse_escape(true));
    } else {
      DI_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
      lo_set = CodepointSet::single(cp);
    }
    // A range a-b (a '-' before ']' is literal).
    if (!eof() && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
      const bool single_lo = lo_set.size() == 1;
      ++pos_;
      CodepointSet hi_set;
      if (consume('\\')) {
        DI_ASSIGN_OR_RETURN(hi_set, parse_escape(true));
      } else {
        DI_ASSIGN_OR_RETURN(uint32_t cp, next_codepoint());
        hi_set = CodepointSet::single(cp);
      }
      if (!single_lo || hi_set.size() != 1) {
        // [\d-x]: the '-' is literal (Annex B).
        set.add(lo_set);
        set.add(hi_set);
        set.add('-', '-');
        continue;
      }
      const uint32_t lo = lo_set.ranges()[0].first, hi = hi_set.ranges()[0].first;
      if (lo > hi) return error("character class range out of order");
      set.add(lo, hi);
      continue;
    }
    set.add(lo_set);
  }
  return negate ? set.negated() : set;
}

class Lowering {
 public:
  Lowering(Ast& ast, const CharMapper& mapper, std::string_view pattern)
      : ast_(ast), mapper_(mapper), pattern_(pattern) {}

  Result<NodeId> lower(const RNode& n) {
    switch (n.kind) {
      case RNode::kChars: return mapper_(ast_, n.set);
      case RNode::kBol:
      case RNode::kEol:
        return invalid_argument("regex /{}/: anchor {} inside the pattern is not supported", pattern_,
                                n.kind == RNode::kBol ? "^" : "$");
      case RNode::kRepeat: {
        DI_ASSIGN_OR_RETURN(NodeId kid, lower(n.kids[0]));
        return ast_.repeat(kid, n.min, n.max);
      }
      case RNode::kSeq:
      case RNode::kAlt: {
        std::vector<NodeId> kids;
        for (const RNode& k : n.kids) {
          DI_ASSIGN_OR_RETURN(NodeId id, lower(k));
          kids.push_back(id);
        }
        return n.kind == RNode::kSeq ? ast_.concat(std::move(kids)) : ast_.alt(std::move(kids));
      }
    }
    return internal_error("regex lowering");
  }

  // A top-level alternative: anchors allowed at its ends.
  Result<NodeId> lower_top(const RNode& n, bool search) {
    if (n.kind == RNode::kAlt) {
      std::vector<NodeId> kids;
      for (const RNode& k : n.kids) {
        DI_ASSIGN_OR_RETURN(NodeId id, lower_top(k, search));
        kids.push_back(id);
      }
      return ast_.alt(std::move(kids));
    }
    std::vector<const RNode*> seq;
    if (n.kind == RNode::kSeq) for (const RNode& k : n.kids) seq.push_back(&k);
    else seq.push_back(&n);
    if (seq.size() == 1 && (seq[0]->kind == RNode::kAlt || seq[0]->kind == RNode::kSeq)) {
      return lower_top(*seq[0], search);  // a group around the whole alternative
    }
    bool bol = false, eol = false;
    size_t b = 0, e = seq.size();
    while (b < e && seq[b]->kind == RNode::kBol) { bol = true; ++b; }
    while (e > b && seq[e - 1]->kind == RNode::kEol) { eol = true; --e; }
    std::vector<NodeId> parts;
    if (search && !bol) parts.push_back(ast_.star(mapper_(ast_, CodepointSet::all())));
    for (size_t i = b; i < e; ++i) {
      DI_ASSIGN_OR_RETURN(NodeId id, lower(*seq[i]));
      parts.push_back(id);
    }
    if (search && !eol) parts.push_back(ast_.star(mapper_(ast_, CodepointSet::all())));
    return ast_.concat(std::move(parts));
  }

 private:
  Ast& ast_;
  const CharMapper& mapper_;
  std::string_view pattern_;
};

}  // namespace

NodeId raw_chars(Ast& ast, const CodepointSet& set) { return ast.chars(set); }

Result<NodeId> parse_regex(std::string_view pattern, Ast& ast, const RegexOptions& options,
                           const CharMapper& mapper) {
  Parser parser(pattern);
  DI_ASSIGN_OR_RETURN(RNode tree, parser.parse());
  Lowering lowering(ast, mapper, pattern);
  return lowering.lower_top(tree, options.search);
}

}  // namespace deepinfer::grammar

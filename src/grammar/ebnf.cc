// GBNF / Lark-subset parser -> Grammar (recursive descent; whitespace and newlines are
// insignificant, a rule ends where the next `name ::=` / `name:` begins).
#include "grammar/ebnf.h"

#include <cctype>
#include <map>

#include "grammar/regex.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {
namespace {

class EbnfParser {
 public:
  EbnfParser(std::string_view text, const Vocabulary* vocab, bool lark)
      : s_(text), vocab_(vocab), lark_(lark) {}

  Result<Grammar> parse(const std::string& root_name);

 private:
  Status error(const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    return invalid_argument("{} grammar line {} column {}: {}", lark_ ? "Lark" : "GBNF", line, col, what);
  }
  bool eof() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  }
  void skip_space();
  bool at_rule_start();
  std::string ident();
  int32_t rule_ref(const std::string& name);
  Result<NodeId> alternatives();
  Result<NodeId> sequence();
  Result<NodeId> item();
  Result<NodeId> primary();
  Result<NodeId> quantify(NodeId base);
  Result<std::string> quoted(char quote);
  Result<uint32_t> escape();
  Result<NodeId> char_class();
  Result<NodeId> token_terminal();
  Result<NodeId> lark_regex();
  Result<int32_t> number();

  std::string s_;
  const Vocabulary* vocab_;
  bool lark_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> rules_;
};

void EbnfParser::skip_space() {
  while (!eof()) {
    const char c = peek();
    if (std::isspace(static_cast<unsigned char>(c))) { ++pos_; continue; }
    const bool comment = lark_ ? (c == '/' && peek(1) == '/') : c == '#';
    if (!comment) break;
    while (!eof() && peek() != '\n') ++pos_;
  }
}

bool EbnfParser::at_rule_start() {
  size_t p = pos_;
  if (lark_ && p < s_.size() && (s_[p] == '?' || s_[p] == '!')) ++p;
  const size_t start = p;
  while (p < s_.size() && ident_char(s_[p]) && s_[p] != '-') ++p;
  if (!lark_) while (p < s_.size() && ident_char(s_[p])) ++p;
  if (p == start) return false;
  if (lark_ && p < s_.size() && s_[p] == '.') {  // priority: name.2:
    ++p;
    while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) ++p;
  }
  while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
  if (lark_) return p < s_.size() && s_[p] == ':' && s_.compare(p, 3, "::=") != 0;
  return s_.compare(p, 3, "::=") == 0;
}

std::string EbnfParser::ident() {
  const size_t start = pos_;
  while (!eof() && ident_char(peek()) && !(lark_ && peek() == '-')) ++pos_;
  return s_.substr(start, pos_ - start);
}

int32_t EbnfParser::rule_ref(const std::string& name) {
  auto [it, inserted] = rules_.emplace(name, 0);
  if (inserted) it->second = g_.add_rule(name);
  return it->second;
}

Result<Grammar> EbnfParser::parse(const std::string& root_name) {
  skip_space();
  while (!eof()) {
    if (lark_ && peek() == '%') {
      ++pos_;
      return error("directive %" + ident() + " is not supported");
    }
    if (!at_rule_start()) return error("expected a rule definition (name " + std::string(lark_ ? ":" : "::=") + ")");
    if (lark_ && (peek() == '?' || peek() == '!')) ++pos_;
    const std::string name = ident();
    if (lark_ && peek() == '.') { ++pos_; while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_; }
    skip_space();
    pos_ += lark_ ? 1 : 3;
    const int32_t id = rule_ref(name);
    if (g_.rules[id].body >= 0) return error("rule '" + name + "' is defined twice");
    DI_ASSIGN_OR_RETURN(NodeId body, alternatives());
    g_.rules[id].body = body;
    skip_space();
    if (!eof() && !at_rule_start() && !(lark_ && peek() == '%')) return error(std::string("unexpected '") + peek() + "'");
  }
  auto it = rules_.find(root_name);
  if (it == rules_.end() || g_.rules[it->second].body < 0) {
    return invalid_argument("{} grammar has no start rule '{}'", lark_ ? "Lark" : "GBNF", root_name);
  }
  for (const Rule& r : g_.rules) {
    if (r.body < 0) return invalid_argument("grammar rule '{}' is used but never defined", r.name);
  }
  g_.root = it->second;
  return std::move(g_);
}

Result<NodeId> EbnfParser::alternatives() {
  std::vector<NodeId> alts;
  DI_ASSIGN_OR_RETURN(NodeId first, sequence());
  alts.push_back(first);
  while (true) {
    skip_space();
    if (peek() != '|') break;
    ++pos_;
    DI_ASSIGN_OR_RETURN(NodeId next, sequence());
    alts.push_back(next);
  }
  return g_.ast.alt(std::move(alts));
}

Result<NodeId> EbnfParser::sequence() {
  std::vector<NodeId> items;
  while (true) {
    skip_space();
    if (eof() || peek() == '|' || peek() == ')' || (lark_ && peek() == ']') || at_rule_start()) break;
    if (lark_ && peek() == '%') break;
    if (lark_ && peek() == '-' && peek(1) == '>') {  // alias: ignored
      pos_ += 2;
      skip_space();
      ident();
      continue;
    }
    DI_ASSIGN_OR_RETURN(NodeId it, item());
    items.push_back(it);
  }
  return g_.ast.concat(std::move(items));
}

Result<NodeId> EbnfParser::item() {
  DI_ASSIGN_OR_RETURN(NodeId base, primary());
  return quantify(base);
}

Result<int32_t> EbnfParser::number() {
  skip_space();
  if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("expected a number");
  int64_t v = 0;
  while (std::isdigit(static_cast<unsigned char>(peek()))) {
    v = v * 10 + (peek() - '0');
    if (v > 100'000) return error("repeat count above 100000");
    ++pos_;
  }
  return static_cast<int32_t>(v);
}

Result<NodeId> EbnfParser::quantify(NodeId base) {
  while (true) {
    {
      // Blanks may come before the operator: Lark's `item ~ n`, and GBNF's `"a" *` / `x {2}` (as
      // llama.cpp parses: spaces after each element, then the repetition operators).
      size_t p = pos_;
      while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
      if (p < s_.size() && (lark_ ? s_[p] == '~' : std::string_view("*+?{").find(s_[p]) != std::string_view::npos)) {
        pos_ = p;
      }
    }
    const char c = peek();
    if (c == '*') { ++pos_; base = g_.ast.star(base); }
    else if (c == '+') { ++pos_; base = g_.ast.plus(base); }
    else if (c == '?') { ++pos_; base = g_.ast.optional(base); }
    else if (!lark_ && c == '{') {
      ++pos_;
      skip_space();
      int32_t min = 0, max = kUnbounded;
      if (peek() != ',') { DI_ASSIGN_OR_RETURN(min, number()); }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        if (peek() != '}') { DI_ASSIGN_OR_RETURN(max, number()); }
      } else {
        max = min;
      }
      skip_space();
      if (peek() != '}') return error("expected '}' in repetition");
      ++pos_;
      if (max != kUnbounded && max < min) return error("repetition {m,n} with n < m");
      base = g_.ast.repeat(base, min, max);
    } else if (lark_ && c == '~') {
      ++pos_;
      DI_ASSIGN_OR_RETURN(int32_t min, number());
      int32_t max = min;
      if (peek() == '.' && peek(1) == '.') { pos_ += 2; DI_ASSIGN_OR_RETURN(max, number()); }
      if (max < min) return error("repetition ~ n..m with m < n");
      base = g_.ast.repeat(base, min, max);
    } else {
      return base;
    }
  }
}

Result<uint32_t> EbnfParser::escape() {
  if (eof()) return error("trailing backslash");
  const char c = s_[pos_++];
  auto hex = [&](int n) -> Result<uint32_t> {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const char h = peek();
      if (!std::isxdigit(static_cast<unsigned char>(h))) return error("bad hex escape");
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  };
  switch (c) {
    case 'n': return uint32_t{'\n'};
    case 't': return uint32_t{'\t'};
    case 'r': return uint32_t{'\r'};
    case 'f': return uint32_t{'\f'};
    case 'v': return uint32_t{'\v'};
    case '0': return uint32_t{0};
    case 'x': return hex(2);
    case 'u': return hex(4);
    case 'U': return hex(8);
    default: return static_cast<uint32_t>(static_cast<unsigned char>(c));
  }
}

Result<std::string> EbnfParser::quoted(char quote) {
  ++pos_;
  std::string out;
  while (true) {
    if (eof()) return error("unterminated string literal");
    const char c = peek();
    if (c == quote) { ++pos_; break; }
    if (c == '\\') {
      ++pos_;
      DI_ASSIGN_OR_RETURN(uint32_t cp, escape());
      if (cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) return error("escape out of range");
      append_utf8(cp, out);
    } else {
      out.push_back(c);
      ++pos_;
    }
  }
  return out;
}

Result<NodeId> EbnfParser::char_class() {
  ++pos_;  // '['
  const bool negate = peek() == '^';
  if (negate) ++pos_;
  CodepointSet set;
  auto one = [&]() -> Result<uint32_t> {
    if (peek() == '\\') { ++pos_; return escape(); }
    uint32_t cp;
    size_t p = pos_;
    if (!decode_utf8(s_, p, cp)) return error("invalid UTF-8 in character class");
    pos_ = p;
    return cp;
  };
  while (true) {
    if (eof()) return error("unterminated character class");
    if (peek() == ']') { ++pos_; break; }
    DI_ASSIGN_OR_RETURN(uint32_t lo, one());
    uint32_t hi = lo;
    if (peek() == '-' && peek(1) != ']') {
      ++pos_;
      DI_ASSIGN_OR_RETURN(hi, one());
      if (hi < lo) return error("character class range out of order");
    }
    set.add(lo, hi);
  }
  return g_.ast.chars(negate ? set.negated() : set);
}

Result<NodeId> EbnfParser::token_terminal() {
  const size_t start = pos_;
  ++pos_;  // '<'
  if (peek() == '[') {
    ++pos_;
    DI_ASSIGN_OR_RETURN(int32_t id, number());
    if (peek() != ']' || peek(1) != '>') return error("expected ']>' after token id");
    pos_ += 2;
    if (vocab_ && id >= vocab_->n_tokens()) return error("token id " + std::to_string(id) + " is out of range");
    return g_.ast.token(id);
  }
  const size_t close = s_.find('>', pos_);
  if (close == std::string::npos) return error("unterminated token terminal <...>");
  const std::string text = s_.substr(start, close + 1 - start);
  pos_ = close + 1;
  const int32_t id = vocab_ ? vocab_->find_special(text) : -1;
  if (id < 0) return error("no special token with text " + text);
  return g_.ast.token(id);
}

Result<NodeId> EbnfParser::lark_regex() {
  ++pos_;  // '/'
  std::string pattern;
  while (true) {
    if (eof()) return error("unterminated /regex/");
    const char c = peek();
    if (c == '/') { ++pos_; break; }
    if (c == '\\' && peek(1) == '/') { pattern.push_back('/'); pos_ += 2; continue; }
    if (c == '\\') { pattern.push_back(c); ++pos_; }
    pattern.push_back(peek());
    ++pos_;
  }
  if (std::isalpha(static_cast<unsigned char>(peek()))) return error(std::string("regex flag '") + peek() + "' is not supported");
  auto node = parse_regex(pattern, g_.ast, {}, raw_chars);
  if (!node.is_ok()) return error(node.status().message());
  return *node;
}

Result<NodeId> EbnfParser::primary() {
  const char c = peek();
  if (c == '"' || (lark_ && c == '\'')) {
    DI_ASSIGN_OR_RETURN(std::string lit, quoted(c));
    if (lark_ && peek() == 'i' && !ident_char(peek(1))) {  // case-insensitive literal
      ++pos_;
      std::vector<NodeId> parts;
      for (unsigned char ch : lit) {
        if (std::isalpha(ch)) {
          CodepointSet cs = CodepointSet::single(static_cast<uint32_t>(std::tolower(ch)));
          cs.add(static_cast<uint32_t>(std::toupper(ch)), static_cast<uint32_t>(std::toupper(ch)));
          parts.push_back(g_.ast.chars(cs));
        } else {
          parts.push_back(g_.ast.byte(ch));
        }
      }
      return g_.ast.concat(std::move(parts));
    }
    if (lark_ && peek() == '.' && peek(1) == '.') {  // "a".."z"
      pos_ += 2;
      skip_space();
      if (peek() != '"' && peek() != '\'') return error("expected a literal after '..'");
      DI_ASSIGN_OR_RETURN(std::string hi, quoted(peek()));
      size_t p0 = 0, p1 = 0;
      uint32_t lo_cp, hi_cp;
      if (!decode_utf8(lit, p0, lo_cp) || p0 != lit.size() || !decode_utf8(hi, p1, hi_cp) || p1 != hi.size()) {
        return error("a \"a\"..\"z\" range needs single characters");
      }
      if (hi_cp < lo_cp) return error("range out of order");
      return g_.ast.chars(CodepointSet::range(lo_cp, hi_cp));
    }
    return g_.ast.literal(lit);
  }
  if (c == '(') {
    ++pos_;
    DI_ASSIGN_OR_RETURN(NodeId inner, alternatives());
    skip_space();
    if (peek() != ')') return error("missing ')'");
    ++pos_;
    return inner;
  }
  if (c == '[') {
    if (!lark_) return char_class();
    ++pos_;
    DI_ASSIGN_OR_RETURN(NodeId inner, alternatives());
    skip_space();
    if (peek() != ']') return error("missing ']'");
    ++pos_;
    return g_.ast.optional(inner);
  }
  if (c == '.' && !lark_) { ++pos_; return g_.ast.chars(CodepointSet::all()); }
  if (c == '<' && !lark_) return token_terminal();
  if (c == '!' && peek(1) == '<') return error("negated token terminal !<...> is not supported");
  if (lark_ && c == '/') return lark_regex();
  if (ident_char(c) && c != '-') {
    const std::string name = ident();
    return g_.ast.rule(rule_ref(name));
  }
  if (eof()) return error("unexpected end of grammar");
  return error(std::string("unexpected '") + c + "'");
}

}  // namespace

Result<Grammar> parse_ebnf(std::string_view text, const Vocabulary* vocab, const EbnfOptions& options) {
  const bool lark = text.find("::=") == std::string_view::npos;
  EbnfParser parser(text, vocab, lark);
  const std::string root = !options.root.empty() ? options.root : (lark ? "start" : "root");
  return parser.parse(root);
}

}  // namespace deepinfer::grammar

// Exact decimal parsing and comparison, bound regexes (x >= L, x <= H over canonical decimals,
// built digit by digit), the multipleOf remainder automaton, and their intersection.
#include "grammar/json_number.h"

#include <algorithm>
#include <map>

#include "grammar/regex.h"

namespace deepinfer::grammar {

Result<Decimal> Decimal::parse(std::string_view text) {
  size_t pos = 0;
  Decimal d;
  const bool neg = pos < text.size() && text[pos] == '-';
  if (neg) ++pos;
  std::string digits;
  int64_t point = -1;
  for (; pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'); ++pos) {
    if (text[pos] == '.') {
      if (point >= 0) return invalid_argument("bad number '{}'", text);
      point = static_cast<int64_t>(digits.size());
    } else {
      digits.push_back(text[pos]);
    }
  }
  if (digits.empty()) return invalid_argument("bad number '{}'", text);
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    int64_t exp = 0;
    const bool exp_neg = pos < text.size() && text[pos] == '-';
    if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) ++pos;
    if (pos >= text.size()) return invalid_argument("bad number '{}'", text);
    for (; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos) {
      exp = std::min<int64_t>(exp * 10 + (text[pos] - '0'), 100'000);
    }
    if (exp > 4000) return invalid_argument("number '{}' is out of the supported range", text);
    point += exp_neg ? -exp : exp;
  }
  if (pos != text.size()) return invalid_argument("bad number '{}'", text);
  // Place the decimal point, padding with zeros as needed.
  if (point < 0) { digits.insert(0, static_cast<size_t>(-point), '0'); point = 0; }
  if (point > static_cast<int64_t>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  d.int_digits = digits.substr(0, static_cast<size_t>(point));
  d.frac_digits = digits.substr(static_cast<size_t>(point));
  d.int_digits.erase(0, std::min(d.int_digits.find_first_not_of('0'), d.int_digits.size()));
  if (d.int_digits.empty()) d.int_digits = "0";
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  d.neg = neg && !d.is_zero();
  return d;
}

int Decimal::compare(const Decimal& o) const {
  if (neg != o.neg) return neg ? -1 : 1;
  int mag;
  if (int_digits.size() != o.int_digits.size()) {
    mag = int_digits.size() < o.int_digits.size() ? -1 : 1;
  } else if (int_digits != o.int_digits) {
    mag = int_digits < o.int_digits ? -1 : 1;
  } else {
    mag = frac_digits == o.frac_digits ? 0 : (frac_digits < o.frac_digits ? -1 : 1);
  }
  return neg ? -mag : mag;
}

std::string Decimal::to_string() const {
  return (neg ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

namespace {

const char* const kNonNeg = "(0|[1-9][0-9]*)(\\.[0-9]+)?";
const char* const kFrac = "(\\.[0-9]+)?";

std::string digit_range(char lo, char hi) { return lo == hi ? std::string(1, lo) : std::string("[") + lo + "-" + hi + "]"; }
std::string any_digits(size_t n) { return n == 0 ? "" : "[0-9]{" + std::to_string(n) + "}"; }

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.empty()) return "[]";  // matches nothing
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
  return out + ")";
}

// Canonical non-negative decimals x with x >= L (x > L when strict).
std::string geq_nonneg(const Decimal& L, bool strict) {
  const std::string& I = L.int_digits;
  const std::string& F = L.frac_digits;
  const size_t n = I.size();
  std::vector<std::string> alts{"[1-9][0-9]{" + std::to_string(n) + ",}" + kFrac};
  for (size_t k = 0; k < n; ++k) {
    if (I[k] == '9') continue;
    alts.push_back(I.substr(0, k) + digit_range(static_cast<char>(I[k] + 1), '9') + any_digits(n - k - 1) + kFrac);
  }
  if (F.empty()) {
    alts.push_back(strict ? I + "\\.0*[1-9][0-9]*" : I + kFrac);
  } else {
    for (size_t k = 0; k < F.size(); ++k) {
      if (F[k] == '9') continue;
      alts.push_back(I + "\\." + F.substr(0, k) + digit_range(static_cast<char>(F[k] + 1), '9') + "[0-9]*");
    }
    alts.push_back(I + "\\." + F + "0*[1-9][0-9]*");
    if (!strict) alts.push_back(I + "\\." + F + "0*");
  }
  return join_alts(alts);
}

// Canonical non-negative decimals x with x <= H (x < H when strict).
std::string leq_nonneg(const Decimal& H, bool strict) {
  const std::string& I = H.int_digits;
  const std::string& F = H.frac_digits;
  const size_t n = I.size();
  std::vector<std::string> alts;
  if (n >= 2) alts.push_back("(0|[1-9][0-9]{0," + std::to_string(n - 2) + "})" + kFrac);
  for (size_t k = 0; k < n; ++k) {
    const char lo = (k == 0 && n > 1) ? '1' : '0';
    if (I[k] - 1 < lo) continue;
    alts.push_back(I.substr(0, k) + digit_range(lo, static_cast<char>(I[k] - 1)) + any_digits(n - k - 1) + kFrac);
  }
  if (F.empty()) {
    if (!strict) alts.push_back(I + "(\\.0+)?");
  } else {
    alts.push_back(I);
    for (size_t k = 0; k < F.size(); ++k) {
      if (F[k] == '0') continue;
      alts.push_back(I + "\\." + F.substr(0, k) + digit_range('0', static_cast<char>(F[k] - 1)) + "[0-9]*");
    }
    for (size_t j = 1; j < F.size(); ++j) alts.push_back(I + "\\." + F.substr(0, j));
    if (!strict) alts.push_back(I + "\\." + F + "0*");
  }
  return join_alts(alts);
}

std::string lower_bound_regex(const Decimal& L, bool strict) {
  if (!L.neg) {
    std::string re = geq_nonneg(L, strict);
    if (L.is_zero() && !strict) re += "|-0(\\.0+)?";
    return re;
  }
  return std::string(kNonNeg) + "|-" + leq_nonneg(L.abs(), strict);
}

std::string upper_bound_regex(const Decimal& H, bool strict) {
  if (H.neg) return "-" + geq_nonneg(H.abs(), strict);
  std::string re = leq_nonneg(H, strict);
  if (H.is_zero() && strict) return re + "|-" + geq_nonneg(Decimal{}, true);
  return re + "|-" + kNonNeg;
}

uint64_t pow10_mod(size_t e, uint64_t a) {
  uint64_t r = 1 % a;
  for (size_t i = 0; i < e; ++i) r = r * 10 % a;
  return r;
}

// Texts -?D+(.D+)? whose value is a multiple of m = a * 10^-s (canonical form checked elsewhere).
Result<Dfa> multiple_of_dfa(const Decimal& m, const AutomatonLimits& limits, const std::string& what) {
  const size_t s = m.frac_digits.size();
  const std::string a_text = m.int_digits + m.frac_digits;
  const std::string a_digits = a_text.substr(std::min(a_text.find_first_not_of('0'), a_text.size()));
  if (m.neg || m.is_zero()) return invalid_argument("{}: multipleOf must be positive", what);
  if (a_digits.size() > 6 || s > 12) return unimplemented("{}: multipleOf {} is too fine to enforce", what, m.to_string());
  const uint64_t a = std::stoull(a_digits);
  if (static_cast<int64_t>((s + 3) * a) > limits.max_states) {
    return resource_exhausted("{}: multipleOf {} needs too many automaton states", what, m.to_string());
  }
  RawDfa raw;
  raw.n_classes = 13;  // digits 0-9, '-', '.', other
  for (int b = 0; b < 256; ++b) raw.byte_class[b] = 12;
  for (int d = 0; d < 10; ++d) raw.byte_class['0' + d] = static_cast<uint8_t>(d);
  raw.byte_class['-'] = 10;
  raw.byte_class['.'] = 11;
  std::map<std::pair<int64_t, uint64_t>, int32_t> ids;  // (phase, remainder); phase -2 int, -1 dot, 1..s frac, s+1 tail
  std::vector<std::pair<int64_t, uint64_t>> work;
  auto id = [&](int64_t phase, uint64_t r) {
    auto [it, inserted] = ids.emplace(std::make_pair(phase, r), 0);
    if (inserted) { it->second = raw.add_state(); work.emplace_back(phase, r); }
    return it->second;
  };
  auto set = [&](int32_t from, int cls, int32_t to) { raw.table[static_cast<size_t>(from) * 13 + cls] = to; };
  const int32_t start = raw.add_state(), minus = raw.add_state();
  raw.start = start;
  set(start, 10, minus);
  for (int d = 0; d < 10; ++d) { set(start, d, id(-2, d % a)); set(minus, d, id(-2, d % a)); }
  const auto tail = static_cast<int64_t>(s) + 1;
  while (!work.empty()) {
    const auto [phase, r] = work.back();
    work.pop_back();
    const int32_t st = ids[{phase, r}];
    if (phase == -2) {
      raw.accepting[st] = r * pow10_mod(s, a) % a == 0;
      for (int d = 0; d < 10; ++d) set(st, d, id(-2, (r * 10 + d) % a));
      set(st, 11, id(-1, r));
    } else if (phase == -1 || (phase >= 1 && phase <= static_cast<int64_t>(s))) {
      const size_t j = phase == -1 ? 0 : static_cast<size_t>(phase);
      if (j > 0) raw.accepting[st] = r * pow10_mod(s - j, a) % a == 0;
      if (j < s) {
        for (int d = 0; d < 10; ++d) set(st, d, id(static_cast<int64_t>(j) + 1, (r * 10 + d) % a));
      } else {
        set(st, 0, id(tail, r));
      }
    } else {  // tail: only zeros
      raw.accepting[st] = r == 0;
      set(st, 0, st);
    }
  }
  return DfaBuilder::minimize(raw);
}

}  // namespace

Result<Dfa> regex_dfa(std::string_view pattern, const AutomatonLimits& limits) {
  Ast ast;
  DI_ASSIGN_OR_RETURN(NodeId root, parse_regex(pattern, ast, {}, raw_chars));
  return DfaBuilder::from_ast(ast, root, limits, [](int32_t) { return -1; }, "regex");
}

std::string number_literal_regex(const Decimal& value) {
  std::string re = value.neg ? "-" : "";
  re += value.int_digits;
  re += value.is_integer() ? "(\\.0+)?" : "\\." + value.frac_digits + "0*";
  if (value.is_zero()) re = "-?" + re;
  return re;
}

Result<std::shared_ptr<const Dfa>> number_dfa(const NumberSpec& spec, const AutomatonLimits& limits,
                                              const std::string& what) {
  static DfaCache cache;
  std::string key = std::string(spec.integer ? "i" : "n") + (spec.zero_fraction ? "z" : "");
  if (spec.lower) key += (spec.lower_exclusive ? ">" : ">=") + spec.lower->to_string();
  if (spec.upper) key += (spec.upper_exclusive ? "<" : "<=") + spec.upper->to_string();
  for (const Decimal& m : spec.multiple_of) key += "%" + m.to_string();
  if (auto hit = cache.find(key)) return hit;
  const bool plain = !spec.lower && !spec.upper && spec.multiple_of.empty();
  std::string base;
  if (spec.integer) base = spec.zero_fraction ? "-?(0|[1-9][0-9]*)(\\.0+)?" : "-?(0|[1-9][0-9]*)";
  else if (plain) base = "-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?";
  else base = "-?(0|[1-9][0-9]*)(\\.[0-9]+)?";
  DI_ASSIGN_OR_RETURN(Dfa dfa, regex_dfa(base, limits));
  if (spec.lower) {
    DI_ASSIGN_OR_RETURN(Dfa lo, regex_dfa(lower_bound_regex(*spec.lower, spec.lower_exclusive), limits));
    DI_ASSIGN_OR_RETURN(dfa, dfa_intersect(dfa, lo, limits, what));
  }
  if (spec.upper) {
    DI_ASSIGN_OR_RETURN(Dfa hi, regex_dfa(upper_bound_regex(*spec.upper, spec.upper_exclusive), limits));
    DI_ASSIGN_OR_RETURN(dfa, dfa_intersect(dfa, hi, limits, what));
  }
  for (const Decimal& m : spec.multiple_of) {
    DI_ASSIGN_OR_RETURN(Dfa mod, multiple_of_dfa(m, limits, what));
    DI_ASSIGN_OR_RETURN(dfa, dfa_intersect(dfa, mod, limits, what));
  }
  auto out = std::make_shared<const Dfa>(DfaBuilder::minimize(DfaBuilder::to_raw(dfa)));
  cache.put(key, out);
  return out;
}

}  // namespace deepinfer::grammar

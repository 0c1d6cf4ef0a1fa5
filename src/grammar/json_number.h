// JSON-schema numeric constraints as automata over JSON number text. Bounds are exact decimals
// (no floating-point rounding): minimum/maximum/exclusive* become digit-wise comparison DFAs,
// multipleOf (integer or decimal, e.g. 0.01) a remainder DFA, intersected with the number form.
// With bounds or multipleOf, numbers are emitted without exponent (1e3 is written 1000).
// Integers may carry a zero fraction (5.0): JSON schema counts it as an integer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/dfa.h"

namespace deepinfer::grammar {

// value = (neg ? -1 : 1) * int_digits.frac_digits; zero is never negative.
struct Decimal {
  bool neg = false;
  std::string int_digits = "0";  // no leading zeros
  std::string frac_digits;       // no trailing zeros
  // Parses JSON number text (sign, fraction, exponent).
  static Result<Decimal> parse(std::string_view text);
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
  Decimal abs() const { Decimal d = *this; d.neg = false; return d; }
  int compare(const Decimal& other) const;  // -1, 0, 1
  std::string to_string() const;
};

struct NumberSpec {
  bool integer = false;
  std::optional<Decimal> lower, upper;
  bool lower_exclusive = false, upper_exclusive = false;
  std::vector<Decimal> multiple_of;  // all must divide the value
  bool zero_fraction = true;         // integers may be written 5.0 (not in draft 4)
};

// The DFA of JSON number texts satisfying `spec` (empty DFA if none does). `what` names the
// schema location in errors (e.g. a multipleOf too large to enforce).
// Cached process-wide by spec.
Result<std::shared_ptr<const Dfa>> number_dfa(const NumberSpec& spec, const AutomatonLimits& limits,
                                              const std::string& what);

// Regex (raw) for JSON numbers equal to `value`: 5 -> 5(\.0+)?, 1.5 -> 1\.50*.
std::string number_literal_regex(const Decimal& value);

// Compiles a raw full-match regex to a leaf DFA.
Result<Dfa> regex_dfa(std::string_view pattern, const AutomatonLimits& limits);

}  // namespace deepinfer::grammar

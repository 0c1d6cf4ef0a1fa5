// JSON values with Python's semantics, so the renderer reproduces the official encoder byte for
// byte: parse() behaves like json.loads (object key order kept; a duplicate key keeps its first
// position and takes the last value; integers of any size kept exactly; NaN/Infinity accepted;
// raw control characters in strings rejected) and dump() like json.dumps(v, ensure_ascii=False)
// with the default ", " / ": " separators and float repr. Not a general JSON library.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace deepinfer::chat::pyjson {

struct Value {
  enum class Type : uint8_t { kNull, kBool, kInt, kFloat, kString, kArray, kObject };

  Type type = Type::kNull;
  bool boolean = false;
  std::string text;   // kInt: canonical decimal digits (optional '-'); kString: UTF-8
  double number = 0;  // kFloat
  std::vector<Value> items;                            // kArray
  std::vector<std::pair<std::string, Value>> members;  // kObject, in document order

  bool is_string() const { return type == Type::kString; }
  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
  // Python truthiness: null/false/0/0.0/""/[]/{} are false.
  bool truthy() const;
  // The member named `key`, or nullptr.
  const Value* find(std::string_view key) const;
};

// Parses a complete JSON document. Errors say what was expected and the byte offset.
Result<Value> parse(std::string_view text);

// json.dumps(value, ensure_ascii=False).
std::string dump(const Value& value);
void dump_to(const Value& value, std::string* out);
// json.dumps(s, ensure_ascii=False) for a string: quotes plus \" \\ \n \r \t \b \f and \u00XX for
// other control characters; everything else (including non-ASCII) verbatim.
void append_quoted(std::string_view s, std::string* out);
// Only the escaped body, without the surrounding quotes (for streaming a string in pieces).
void append_escaped(std::string_view s, std::string* out);
// Python's repr(float): shortest round-trip digits, "1.0", "1e+16", "1.5e-05", "inf"-> Infinity.
std::string float_repr(double value);

}  // namespace deepinfer::chat::pyjson

// Python-compatible JSON parse (json.loads) and dump (json.dumps, ensure_ascii=False). The parser
// is a small recursive-descent reader over bytes; depth is capped so hostile input cannot
// exhaust the stack (Python raises RecursionError at a similar depth).
#include "tokenizer/chat/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tokenizer/chat/utf8.h"

namespace deepinfer::chat::pyjson {
namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<Value> parse_document() {
    skip_ws();
    Value v;
    DI_RETURN_IF_ERROR(parse_value(&v, 0));
    skip_ws();
    if (pos_ != s_.size()) return error("extra data after the JSON value");
    return v;
  }

 private:
  Status error(std::string_view what) const {
    return invalid_argument("invalid JSON at byte {}: {}", pos_, what);
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status parse_value(Value* v, int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    if (pos_ >= s_.size()) return error("expecting a value");
    char c = s_[pos_];
    if (c == '{') return parse_object(v, depth);
    if (c == '[') return parse_array(v, depth);
    if (c == '"') {
      v->type = Value::Type::kString;
      return parse_string(&v->text);
    }
    if (consume("null")) return Status::ok();
    if (consume("true") || consume("false")) {
      v->type = Value::Type::kBool;
      v->boolean = s_[pos_ - 4] == 't';  // both words end at pos_; only "true" has 't' 4 back
      return Status::ok();
    }
    if (consume("NaN")) return set_float(v, std::nan(""));
    if (consume("Infinity")) return set_float(v, HUGE_VAL);
    if (consume("-Infinity")) return set_float(v, -HUGE_VAL);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v);
    return error("expecting a value");
  }

  static Status set_float(Value* v, double x) {
    v->type = Value::Type::kFloat;
    v->number = x;
    return Status::ok();
  }

  Status parse_object(Value* v, int depth) {
    v->type = Value::Type::kObject;
    ++pos_;  // '{'
    skip_ws();
    if (consume("}")) return Status::ok();
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return error("expecting a property name in quotes");
      std::string key;
      DI_RETURN_IF_ERROR(parse_string(&key));
      skip_ws();
      if (!consume(":")) return error("expecting ':' delimiter");
      skip_ws();
      Value item;
      DI_RETURN_IF_ERROR(parse_value(&item, depth + 1));
      // Python dict semantics: a repeated key keeps its first position, takes the last value.
      bool replaced = false;
      for (auto& [k, existing] : v->members) {
        if (k == key) {
          existing = std::move(item);
          replaced = true;
          break;
        }
      }
      if (!replaced) v->members.emplace_back(std::move(key), std::move(item));
      skip_ws();
      if (consume("}")) return Status::ok();
      if (!consume(",")) return error("expecting ',' delimiter");
    }
  }

  Status parse_array(Value* v, int depth) {
    v->type = Value::Type::kArray;
    ++pos_;  // '['
    skip_ws();
    if (consume("]")) return Status::ok();
    for (;;) {
      skip_ws();
      Value item;
      DI_RETURN_IF_ERROR(parse_value(&item, depth + 1));
      v->items.push_back(std::move(item));
      skip_ws();
      if (consume("]")) return Status::ok();
      if (!consume(",")) return error("expecting ',' delimiter");
    }
  }

  Status parse_number(Value* v) {
    size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !is_digit(s_[pos_])) {
      pos_ = start;
      return error("expecting a value");
    }
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    }
    bool is_float = false;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      is_float = true;
      pos_ += 2;
      while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (p < s_.size() && is_digit(s_[p])) {
        is_float = true;
        while (p < s_.size() && is_digit(s_[p])) ++p;
        pos_ = p;
      }
    }
    std::string token(s_.substr(start, pos_ - start));
    if (is_float) return set_float(v, std::strtod(token.c_str(), nullptr));
    v->type = Value::Type::kInt;
    v->text = token == "-0" ? "0" : token;
    return Status::ok();
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  Result<uint32_t> parse_hex4() {
    if (pos_ + 4 > s_.size()) return error("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_ + i];
      uint32_t d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return error("invalid \\u escape");
      value = value * 16 + d;
    }
    pos_ += 4;
    return value;
  }

  Status parse_escape(std::string* out) {
    if (pos_ >= s_.size()) return error("unterminated string");
    char c = s_[pos_++];
    switch (c) {
      case '"': out->push_back('"'); return Status::ok();
      case '\\': out->push_back('\\'); return Status::ok();
      case '/': out->push_back('/'); return Status::ok();
      case 'b': out->push_back('\b'); return Status::ok();
      case 'f': out->push_back('\f'); return Status::ok();
      case 'n': out->push_back('\n'); return Status::ok();
      case 'r': out->push_back('\r'); return Status::ok();
      case 't': out->push_back('\t'); return Status::ok();
      case 'u': break;
      default: --pos_; return error("invalid escape");
    }
    DI_ASSIGN_OR_RETURN(uint32_t cp, parse_hex4());
    if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
      size_t save = pos_;
      pos_ += 2;
      DI_ASSIGN_OR_RETURN(uint32_t low, parse_hex4());
      if (low >= 0xDC00 && low <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else {
        pos_ = save;  // the second escape stands on its own
      }
    }
    // A lone surrogate cannot be UTF-8 encoded (Python would fail later); use U+FFFD.
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
    append_utf8(cp, out);
    return Status::ok();
  }

  Status parse_string(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= s_.size()) return error("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (c == '\\') {
        ++pos_;
        DI_RETURN_IF_ERROR(parse_escape(out));
        continue;
      }
      if (c < 0x20) return error("invalid control character in string");
      size_t n = utf8_sequence_length(s_.substr(pos_));
      if (n == 0) return error("invalid UTF-8 in string");
      out->append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

bool Value::truthy() const {
  switch (type) {
    case Type::kNull: return false;
    case Type::kBool: return boolean;
    case Type::kInt: return text != "0";
    case Type::kFloat: return number != 0.0;
    case Type::kString: return !text.empty();
    case Type::kArray: return !items.empty();
    case Type::kObject: return !members.empty();
  }
  return false;
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

Result<Value> parse(std::string_view text) { return Parser(text).parse_document(); }

void append_escaped(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(ch);
        }
    }
  }
}

void append_quoted(std::string_view s, std::string* out) {
  out->push_back('"');
  append_escaped(s, out);
  out->push_back('"');
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in scientific form "d.ddde+XX", then re-laid out the way
  // Python's repr does: fixed notation when -4 <= exponent < 16, else "de+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  int decpt = exponent + 1;  // position of the decimal point relative to the digit string
  int n_digits = static_cast<int>(digits.size());
  if (decpt > 16 || decpt < -3) {
    out.push_back(digits[0]);
    if (n_digits > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out.append(exp_buf);
  } else if (decpt <= 0) {
    out.append("0.");
    out.append(static_cast<size_t>(-decpt), '0');
    out.append(digits);
  } else if (decpt >= n_digits) {
    out.append(digits);
    out.append(static_cast<size_t>(decpt - n_digits), '0');
    out.append(".0");
  } else {
    out.append(digits, 0, decpt);
    out.push_back('.');
    out.append(digits, decpt, std::string::npos);
  }
  return out;
}

void dump_to(const Value& v, std::string* out) {
  switch (v.type) {
    case Value::Type::kNull: out->append("null"); return;
    case Value::Type::kBool: out->append(v.boolean ? "true" : "false"); return;
    case Value::Type::kInt: out->append(v.text); return;
    case Value::Type::kFloat: out->append(float_repr(v.number)); return;
    case Value::Type::kString: append_quoted(v.text, out); return;
    case Value::Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out->append(", ");
        dump_to(v.items[i], out);
      }
      out->push_back(']');
      return;
    case Value::Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < v.members.size(); ++i) {
        if (i > 0) out->append(", ");
        append_quoted(v.members[i].first, out);
        out->append(": ");
        dump_to(v.members[i].second, out);
      }
      out->push_back('}');
      return;
  }
}

std::string dump(const Value& value) {
  std::string out;
  dump_to(value, &out);
  return out;
}

}  // namespace deepinfer::chat::pyjson

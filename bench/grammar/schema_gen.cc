// Schema and instance generation (see schema_gen.h). The vocabulary of names and values mixes
// English, code identifiers, CJK and punctuation so strings exercise multi-byte tokens.
#include "schema_gen.h"

#include <algorithm>
#include <vector>

namespace deepinfer::bench {
namespace {

const std::vector<std::string> kNames = {
    "id", "name", "title", "description", "email", "created_at", "updated_at", "status", "type", "count",
    "price", "quantity", "tags", "items", "user", "address", "city", "country", "zip", "phone", "url",
    "enabled", "score", "rating", "metadata", "owner", "priority", "due_date", "notes", "category",
    "language", "version", "query", "limit", "offset", "location", "latitude", "longitude", "unit",
    "currency", "amount", "reason", "steps", "result", "confidence", "summary", "author", "isbn"};
const std::vector<std::string> kWords = {
    "the", "quick", "brown", "fox", "data", "model", "server", "request", "北京", "上海", "数据", "模型",
    "résumé", "naïve", "API", "JSON", "error:", "v2.1", "hello", "world", "user_42", "#1", "(note)", "—",
    "Straße", "東京", "ok", "value", "x", "line\nbreak", "say \"hi\"", "path\\to", "50%", "tab\there"};
const std::vector<std::string> kPatterns = {
    "^[A-Z]{2,3}-\\d{3,6}$", "^[a-z0-9_]+$", "^\\+?[0-9 ]{7,15}$", "^#[0-9a-fA-F]{6}$",
    "^[A-Z][a-z]+( [A-Z][a-z]+)*$", "^\\d{3}-\\d{2}-\\d{4}$"};
const std::vector<std::string> kFormats = {"date-time", "date", "email", "uuid", "uri", "ipv4", "time"};

}  // namespace

GeneratedCase SchemaGenerator::next() {
  ++counter_;
  GeneratedCase c;
  c.schema = object_schema(0, 3, 14);
  if (chance(0.25)) {
    // A $defs-referenced sub-object used by one property.
    OJson def = object_schema(2, 2, 5);
    c.schema["$defs"] = OJson{{"Ref" + std::to_string(counter_), def}};
    c.schema["properties"]["linked"] = OJson{{"$ref", "#/$defs/Ref" + std::to_string(counter_)}};
  }
  c.instance = instance_of(c.schema, c.schema, 0);
  return c;
}

OJson SchemaGenerator::object_schema(int depth, int min_props, int max_props) {
  OJson s{{"type", "object"}, {"properties", OJson::object()}};
  std::vector<std::string> names = kNames;
  std::shuffle(names.begin(), names.end(), rng_);
  const int n = uniform(min_props, max_props);
  OJson required = OJson::array();
  for (int i = 0; i < n; ++i) {
    s["properties"][names[i]] = value_schema(depth + 1);
    if (chance(0.6)) required.push_back(names[i]);
  }
  if (!required.empty()) s["required"] = required;
  if (chance(0.5)) s["additionalProperties"] = false;
  return s;
}

OJson SchemaGenerator::string_schema() {
  const int kind = uniform(0, 99);
  if (kind < 40) return OJson{{"type", "string"}};
  if (kind < 58) return OJson{{"type", "string"}, {"maxLength", uniform(8, 200)}, {"minLength", uniform(0, 3)}};
  if (kind < 73) {
    OJson e = OJson::array();
    for (int i = 0, k = uniform(2, 8); i < k; ++i) e.push_back(kWords[static_cast<size_t>(uniform(0, 30))] + std::to_string(i));
    return OJson{{"type", "string"}, {"enum", e}};
  }
  if (kind < 90) return OJson{{"type", "string"}, {"format", kFormats[static_cast<size_t>(uniform(0, 6))]}};
  return OJson{{"type", "string"}, {"pattern", kPatterns[static_cast<size_t>(uniform(0, 5))]}};
}

OJson SchemaGenerator::value_schema(int depth) {
  const int kind = uniform(0, 99);
  if (kind < 35) return string_schema();
  if (kind < 50) {
    OJson s{{"type", "integer"}};
    if (chance(0.5)) { s["minimum"] = uniform(0, 10); s["maximum"] = uniform(100, 100000); }
    return s;
  }
  if (kind < 60) {
    OJson s{{"type", "number"}};
    if (chance(0.4)) s["minimum"] = 0;
    if (chance(0.2)) s["exclusiveMaximum"] = 1000.5;
    return s;
  }
  if (kind < 70) return OJson{{"type", "boolean"}};
  if (kind < 85) {
    OJson items = depth < 3 && chance(0.3) ? object_schema(depth + 1, 2, 5)
                                           : (chance(0.5) ? string_schema() : OJson{{"type", "integer"}});
    OJson s{{"type", "array"}, {"items", items}};
    if (chance(0.3)) s["minItems"] = 1;
    if (chance(0.3)) s["maxItems"] = uniform(3, 20);
    return s;
  }
  if (kind < 95 && depth < 3) return object_schema(depth + 1, 1, 6);
  return OJson{{"anyOf", OJson::array({string_schema(), OJson{{"type", "null"}}})}};
}

std::string SchemaGenerator::text(int min_chars, int max_chars) {
  std::string out;
  const int target = uniform(std::max(min_chars, 1), std::max(min_chars, std::min(max_chars, 60)));
  int chars = 0;
  while (chars < target) {
    const std::string& w = kWords[static_cast<size_t>(uniform(0, static_cast<int>(kWords.size()) - 1))];
    std::string piece = (out.empty() ? "" : " ") + w;
    int n = 0;
    for (unsigned char c : piece) n += (c & 0xC0) != 0x80;
    if (chars + n > max_chars) break;
    out += piece;
    chars += n;
  }
  while (chars < min_chars) { out += "a"; ++chars; }
  return out;
}

std::string SchemaGenerator::pattern_example(const std::string& p) {
  auto digits = [&](int n) { std::string s; for (int i = 0; i < n; ++i) s.push_back(static_cast<char>('0' + uniform(0, 9))); return s; };
  if (p == kPatterns[0]) return "AB" + std::string(chance(0.5) ? "C" : "") + "-" + digits(uniform(3, 6));
  if (p == kPatterns[1]) return "user_" + digits(uniform(1, 4));
  if (p == kPatterns[2]) return "+86 " + digits(10);
  if (p == kPatterns[3]) return "#a0F3" + digits(2);
  if (p == kPatterns[4]) return "New York City";
  return digits(3) + "-" + digits(2) + "-" + digits(4);
}

OJson SchemaGenerator::instance_of(const OJson& s, const OJson& root, int depth) {
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"].get<std::string>();
    return instance_of(root["$defs"][ref.substr(ref.rfind('/') + 1)], root, depth);
  }
  if (s.contains("anyOf")) return chance(0.7) ? instance_of(s["anyOf"][0], root, depth) : OJson(nullptr);
  if (s.contains("enum")) return s["enum"][static_cast<size_t>(uniform(0, static_cast<int>(s["enum"].size()) - 1))];
  const std::string type = s["type"].get<std::string>();
  if (type == "object") {
    OJson o = OJson::object();
    for (const auto& [k, sub] : s["properties"].items()) {
      const bool req = s.contains("required") && std::find(s["required"].begin(), s["required"].end(), k) != s["required"].end();
      if (req || chance(0.6)) o[k] = instance_of(sub, root, depth + 1);
    }
    return o;
  }
  if (type == "array") {
    const int lo = s.contains("minItems") ? s["minItems"].get<int>() : 0;
    const int hi = s.contains("maxItems") ? s["maxItems"].get<int>() : 6;
    OJson a = OJson::array();
    for (int i = 0, n = uniform(lo, std::min(hi, 6)); i < n; ++i) a.push_back(instance_of(s["items"], root, depth + 1));
    return a;
  }
  if (type == "integer") {
    const int lo = s.contains("minimum") ? s["minimum"].get<int>() : -1000;
    const int hi = s.contains("maximum") ? s["maximum"].get<int>() : 100000;
    return uniform(lo, hi);
  }
  if (type == "number") return static_cast<double>(uniform(0, 99999)) / 100.0;
  if (type == "boolean") return chance(0.5);
  if (s.contains("pattern")) return pattern_example(s["pattern"].get<std::string>());
  if (s.contains("format")) {
    const std::string f = s["format"].get<std::string>();
    if (f == "date-time") return "2024-0" + std::to_string(uniform(1, 9)) + "-1" + std::to_string(uniform(0, 9)) + "T08:30:00Z";
    if (f == "date") return "2023-12-" + std::to_string(uniform(10, 28));
    if (f == "time") return "23:59:0" + std::to_string(uniform(0, 9)) + "+08:00";
    if (f == "email") return "user" + std::to_string(uniform(1, 999)) + "@example.com";
    if (f == "uuid") return "123e4567-e89b-12d3-a456-42661417400" + std::to_string(uniform(0, 9));
    if (f == "uri") return "https://example.com/api/v1/items?id=" + std::to_string(uniform(1, 9999));
    return "192.168." + std::to_string(uniform(0, 255)) + "." + std::to_string(uniform(0, 255));
  }
  const int lo = s.contains("minLength") ? s["minLength"].get<int>() : 0;
  const int hi = s.contains("maxLength") ? s["maxLength"].get<int>() : 80;
  return text(lo, hi);
}

}  // namespace deepinfer::bench

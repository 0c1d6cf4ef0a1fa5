// JSON schema compiler edge cases beyond the test suite: literals and numeric equality, exact
// decimal bounds, multipleOf, lengths with escapes and non-ASCII, patterns over escaped text,
// object key rules, orders and separators, oneOf, recursion, and errors that name the keyword.
#include <gtest/gtest.h>

#include <chrono>

#include "grammar/json_schema.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

using testing::small_vocab;

Result<std::shared_ptr<const CompiledGrammar>> compile(const std::string& schema, const JsonSchemaOptions& o = {}) {
  DI_ASSIGN_OR_RETURN(Grammar g, json_schema_to_grammar(std::string_view(schema), o));
  return CompiledGrammar::compile(std::move(g), small_vocab().vocab);
}

std::shared_ptr<const CompiledGrammar> must(const std::string& schema, const JsonSchemaOptions& o = {}) {
  auto r = compile(schema, o);
  EXPECT_TRUE(r.is_ok()) << schema << ": " << r.status().to_string();
  return r.is_ok() ? *r : nullptr;
}

bool ok(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  return testing::accepts(g, small_vocab(), text);
}

std::string error_of(const std::string& schema, const JsonSchemaOptions& o = {}) {
  auto r = compile(schema, o);
  return r.is_ok() ? "" : r.status().message();
}

TEST(JsonSchemaTest, EnumAndConstLiterals) {
  auto g = must(R"({"enum": [1, "a\"b", null, [1, 2], {"k": true}]})");
  EXPECT_TRUE(ok(g, "1"));
  EXPECT_TRUE(ok(g, "1.0"));  // equal as numbers
  EXPECT_TRUE(ok(g, R"("a\"b")"));
  EXPECT_TRUE(ok(g, "null"));
  EXPECT_TRUE(ok(g, "[1,2]"));
  EXPECT_TRUE(ok(g, R"({"k":true})"));
  EXPECT_FALSE(ok(g, "2"));
  EXPECT_FALSE(ok(g, "10"));
  EXPECT_FALSE(ok(g, R"("ab")"));
  EXPECT_FALSE(ok(g, "[2,1]"));
  auto c = must(R"({"const": 2.5, "type": "number"})");
  EXPECT_TRUE(ok(c, "2.5"));
  EXPECT_TRUE(ok(c, "2.50"));
  EXPECT_FALSE(ok(c, "2.51"));
  // Members that fail the sibling keywords are dropped.
  auto s = must(R"({"enum": ["a", "bbbb", 3], "type": "string", "maxLength": 2})");
  EXPECT_TRUE(ok(s, R"("a")"));
  EXPECT_FALSE(ok(s, R"("bbbb")"));
  EXPECT_FALSE(ok(s, "3"));
}

TEST(JsonSchemaTest, ExactDecimalBounds) {
  auto g = must(R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 10.25})");
  for (const char* yes : {"-1.5", "-1.49", "0", "-0", "10.2", "10.249999", "3"}) EXPECT_TRUE(ok(g, yes)) << yes;
  for (const char* no : {"-1.51", "-2", "10.25", "10.250", "11", "100"}) EXPECT_FALSE(ok(g, no)) << no;
  auto i = must(R"({"type": "integer", "exclusiveMinimum": 0, "maximum": 120})");
  for (const char* yes : {"1", "99", "120", "7.0"}) EXPECT_TRUE(ok(i, yes)) << yes;
  for (const char* no : {"0", "-0", "121", "1.5", "007"}) EXPECT_FALSE(ok(i, no)) << no;
  auto neg = must(R"({"type": "integer", "maximum": -10})");
  EXPECT_TRUE(ok(neg, "-10"));
  EXPECT_TRUE(ok(neg, "-1000"));
  EXPECT_FALSE(ok(neg, "-9"));
  EXPECT_FALSE(ok(neg, "5"));
}

TEST(JsonSchemaTest, MultipleOf) {
  auto g = must(R"({"type": "integer", "multipleOf": 7})");
  for (const char* yes : {"0", "7", "-14", "700", "343"}) EXPECT_TRUE(ok(g, yes)) << yes;
  for (const char* no : {"1", "8", "-15", "701"}) EXPECT_FALSE(ok(g, no)) << no;
  auto d = must(R"({"type": "number", "multipleOf": 0.25, "minimum": 0})");
  for (const char* yes : {"0", "0.25", "1.5", "2.750", "10"}) EXPECT_TRUE(ok(d, yes)) << yes;
  for (const char* no : {"0.1", "1.26", "-0.25", "0.125"}) EXPECT_FALSE(ok(d, no)) << no;
}

TEST(JsonSchemaTest, StringLengthCountsCodePointsAndEscapes) {
  auto g = must(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(ok(g, R"("ab")"));
  EXPECT_TRUE(ok(g, R"("中文")"));
  EXPECT_TRUE(ok(g, R"("a\nb")"));    // 3 characters
  EXPECT_TRUE(ok(g, R"("\"\\")"));     // 2 characters
  EXPECT_FALSE(ok(g, R"("a")"));
  EXPECT_FALSE(ok(g, R"("abcd")"));
  EXPECT_FALSE(ok(g, R"("中文中文")"));
  EXPECT_FALSE(ok(g, "\"a\nb\""));     // raw control character
}

TEST(JsonSchemaTest, PatternsApplyToTheDecodedString) {
  auto g = must(R"({"type": "string", "pattern": "^a\"b\\\\c$"})");  // a"b\c
  EXPECT_TRUE(ok(g, R"("a\"b\\c")"));
  EXPECT_FALSE(ok(g, R"("a\"b\c")"));
  auto search = must(R"({"type": "string", "pattern": "[0-9]{3}"})");  // unanchored
  EXPECT_TRUE(ok(search, R"("ab123cd")"));
  EXPECT_FALSE(ok(search, R"("ab12cd")"));
}

TEST(JsonSchemaTest, ObjectsPropertiesPatternsAdditional) {
  const std::string schema = R"({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "patternProperties": {"^x-": {"type": "boolean"}},
      "additionalProperties": false, "required": ["name"]})";
  auto g = must(schema);
  EXPECT_TRUE(ok(g, R"({"name":"a"})"));
  EXPECT_TRUE(ok(g, R"({"name":"a","age":3,"x-y":true})"));
  EXPECT_FALSE(ok(g, R"({"age":3})"));
  EXPECT_FALSE(ok(g, R"({"name":"a","other":1})"));
  EXPECT_FALSE(ok(g, R"({"name":"a","x-y":1})"));
  EXPECT_FALSE(ok(g, R"({"name":"a","name":"b"})"));  // no duplicate keys
  // Schema order by default; any order on request.
  EXPECT_FALSE(ok(g, R"({"age":3,"name":"a"})"));
  JsonSchemaOptions any;
  any.any_order = true;
  auto a = must(schema, any);
  EXPECT_TRUE(ok(a, R"({"age":3,"name":"a"})"));
  EXPECT_TRUE(ok(a, R"({"x-q":false,"name":"a","age":3})"));
  EXPECT_FALSE(ok(a, R"({"age":3,"age":4,"name":"a"})"));
}

TEST(JsonSchemaTest, PropertyCountsAndArrays) {
  auto g = must(R"({"type": "object", "minProperties": 1, "maxProperties": 2})");
  EXPECT_TRUE(ok(g, R"({"a":1})"));
  EXPECT_TRUE(ok(g, R"({"a":1,"b":[]})"));
  EXPECT_FALSE(ok(g, "{}"));
  EXPECT_FALSE(ok(g, R"({"a":1,"b":2,"c":3})"));
  auto t = must(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                    "items": false, "minItems": 1})");
  EXPECT_TRUE(ok(t, "[1]"));
  EXPECT_TRUE(ok(t, R"([1,"a"])"));
  EXPECT_FALSE(ok(t, "[]"));
  EXPECT_FALSE(ok(t, R"(["a"])"));
  EXPECT_FALSE(ok(t, R"([1,"a",2])"));
  auto n = must(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3})");
  EXPECT_TRUE(ok(n, "[true,false]"));
  EXPECT_FALSE(ok(n, "[true]"));
  EXPECT_FALSE(ok(n, "[true,true,true,true]"));
}

TEST(JsonSchemaTest, WhitespaceAndSeparators) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "array"}}})";
  JsonSchemaOptions flex;
  flex.flexible_whitespace = true;
  flex.max_whitespace = 4;
  auto f = must(schema, flex);
  EXPECT_TRUE(ok(f, "{ \"a\" : [ 1 , 2 ] }"));
  EXPECT_TRUE(ok(f, "\n{\"a\":[]}\n"));
  EXPECT_FALSE(ok(f, "{      \"a\":[]}"));  // more than 4 whitespace bytes in one gap
  JsonSchemaOptions py = python_json_style();
  auto p = must(schema, py);
  EXPECT_TRUE(ok(p, R"({"a": [1, 2]})"));
  EXPECT_FALSE(ok(p, R"({"a":[1,2]})"));
}

TEST(JsonSchemaTest, OneOfNeedsDisjointBranches) {
  auto g = must(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
      {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]},
      {"type": "string"}]})");
  EXPECT_TRUE(ok(g, R"({"kind":"a","x":1})"));
  EXPECT_TRUE(ok(g, R"({"kind":"b"})"));
  EXPECT_TRUE(ok(g, R"("s")"));
  EXPECT_FALSE(ok(g, R"({"kind":"c"})"));
  const std::string e = error_of(R"({"properties": {"v": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}})");
  EXPECT_NE(e.find("keyword 'oneOf' at #/properties/v/oneOf"), std::string::npos) << e;
}

TEST(JsonSchemaTest, RecursiveRefs) {
  auto g = must(R"({"$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
      "required": ["v", "next"], "additionalProperties": false}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(ok(g, R"({"v":1,"next":null})"));
  EXPECT_TRUE(ok(g, R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"));
  EXPECT_FALSE(ok(g, R"({"v":1,"next":{"v":2}})"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreErrorsNamingThePath) {
  EXPECT_NE(error_of(R"({"properties": {"a": {"not": {"type": "string"}}}})").find("keyword 'not' at #/properties/a"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "array", "uniqueItems": true})").find("keyword 'uniqueItems' at #"), std::string::npos);
  JsonSchemaOptions strict;
  strict.unknown_formats_are_annotations = false;
  EXPECT_NE(error_of(R"({"type": "string", "format": "hostname-ish"})", strict).find("format 'hostname-ish'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "other.json#/a"})").find("$ref 'other.json#/a'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(error_of(R"J({"type": "string", "pattern": "(?=a)"})J").find("lookahead"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type": "array", "uniqueItems": false})"), "");
  // By default an unknown format is an annotation (the JSON Schema default): any string.
  EXPECT_EQ(error_of(R"({"type": "string", "format": "hostname-ish"})"), "");
  auto any = must(R"({"type": "string", "format": "hostname-ish"})");
  EXPECT_TRUE(ok(any, R"("not a hostname at all")"));
  EXPECT_FALSE(ok(any, "5"));
}

TEST(JsonSchemaTest, FormatsAndAllOf) {
  auto g = must(R"({"allOf": [{"type": "string", "format": "date"}, {"maxLength": 10}]})");
  EXPECT_TRUE(ok(g, R"("2024-02-29")"));
  EXPECT_FALSE(ok(g, R"("2024-02-30")"));
  EXPECT_FALSE(ok(g, R"("2024-13-01")"));
  auto u = must(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(ok(u, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(ok(u, R"("123e4567-e89b-12d3-a456-42661417400")"));
  auto ip = must(R"({"type": "string", "format": "ipv6"})");
  EXPECT_TRUE(ok(ip, R"("::1")"));
  EXPECT_TRUE(ok(ip, R"("fe80::1:2")"));
  EXPECT_FALSE(ok(ip, R"("1::2::3")"));
}

// RFC 3986 URIs: brackets only around an IP-literal host, "%" only as an encoded octet, a
// scheme first; the JSON Schema test suite's valid and invalid examples.
TEST(JsonSchemaTest, UriFormat) {
  auto u = must(R"({"type": "string", "format": "uri"})");
  for (const char* good : {"http://foo.bar/?baz=qux#quux", "http://foo.com/blah_(wikipedia)_blah#cite-1",
                           "http://foo.bar/?q=Test%20URL-encoded%20stuff", "http://xn--nw2a.xn--j6w193g/",
                           "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com", "http://223.255.255.254",
                           "ftp://ftp.is.co.za/rfc/rfc1808.txt", "http://www.ietf.org/rfc/rfc2396.txt",
                           "ldap://[2001:db8::7]/c=GB?objectClass?one", "mailto:John.Doe@example.com",
                           "news:comp.infosystems.www.servers.unix", "tel:+1-816-555-1212",
                           "urn:oasis:names:specification:docbook:dtd:xml:4.1.2", "http://[v1.fe80::a+en1]/",
                           "file:///etc/hosts", "about:", "http://example.com:8080/a//b"}) {
    EXPECT_TRUE(ok(u, std::string("\"") + good + "\"")) << good;
  }
  for (const char* bad : {"//foo.bar/?baz=qux#quux", "/abc", "\\\\WINDOWS\\fileshare", "abc",
                          "http:// shouldfail.com", ":// should fail", "bar,baz:foo", "http://[::1",
                          "http://a]b.com/", "http://example.com/[x]", "http://example.com/?q=[1]",
                          "http://example.com/%zz", "http://[1::2::3]/", "1http://example.com"}) {
    EXPECT_FALSE(ok(u, std::string("\"") + bad + "\"")) << bad;
  }
}

// RFC 3339 dates and times with their calendar (February 29 in leap years only; a leap second
// only at 23:59:60 UTC) and ISO 8601 durations (RFC 3339 Appendix A).
TEST(JsonSchemaTest, DateTimeAndDurationFormats) {
  auto d = must(R"({"type": "string", "format": "date"})");
  for (const char* v : {"2024-02-29", "2000-02-29", "1996-02-29", "0400-02-29", "2023-02-28", "2023-12-31"}) {
    EXPECT_TRUE(ok(d, std::string("\"") + v + "\"")) << v;
  }
  for (const char* v : {"2023-02-29", "1900-02-29", "2100-02-29", "2024-02-30", "2023-04-31", "2023-00-10"}) {
    EXPECT_FALSE(ok(d, std::string("\"") + v + "\"")) << v;
  }
  auto t = must(R"({"type": "string", "format": "time"})");
  for (const char* v : {"08:30:06Z", "23:59:60Z", "23:59:60.5+00:00", "08:30:06.283185+01:30"}) {
    EXPECT_TRUE(ok(t, std::string("\"") + v + "\"")) << v;
  }
  for (const char* v : {"22:59:60Z", "23:58:60Z", "12:00:60+01:00", "24:00:00Z", "08:30:06", "08:30:06 PST"}) {
    EXPECT_FALSE(ok(t, std::string("\"") + v + "\"")) << v;
  }
  auto dt = must(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(ok(dt, R"("2024-02-29T23:59:60Z")"));
  EXPECT_FALSE(ok(dt, R"("2023-02-29T10:00:00Z")"));
  // A hostname is at most 253 characters (labels of at most 63).
  auto h = must(R"({"type": "string", "format": "hostname"})");
  std::string name;
  for (int i = 0; i < 4; ++i) name += (i ? "." : "") + std::string(63, static_cast<char>('a' + i));  // 255
  EXPECT_FALSE(ok(h, "\"" + name + "\""));
  EXPECT_TRUE(ok(h, "\"" + name.substr(2) + "\""));  // 253
  EXPECT_TRUE(ok(h, R"("example.com")"));
  auto p = must(R"({"type": "string", "format": "duration"})");
  for (const char* v : {"P4DT12H30M5S", "P4Y", "PT0S", "P0D", "P1M", "PT1M", "PT36H", "P1W", "P1Y2M3D", "PT1H30M"}) {
    EXPECT_TRUE(ok(p, std::string("\"") + v + "\"")) << v;
  }
  for (const char* v : {"P", "PT", "PT1D", "P1YT", "P2D1Y", "P1D2H", "P2S", "P1Y2W", "1D", "P1.5D", "PT1H2D"}) {
    EXPECT_FALSE(ok(p, std::string("\"") + v + "\"")) << v;
  }
}

TEST(JsonSchemaTest, ExplosiveSchemasFailClosedAndFast) {
  // allOf of 6 anyOfs with 8 object branches each would expand to 8^6 alternatives.
  Json any = Json::array();
  for (int i = 0; i < 8; ++i) any.push_back(Json{{"properties", Json{{"p" + std::to_string(i), Json{{"type", "integer"}}}}}});
  Json all = Json::array();
  for (int i = 0; i < 6; ++i) all.push_back(Json{{"anyOf", any}});
  const auto start = ThreadCpuClock::now();
  JsonSchemaOptions o;
  o.automata.deadline = start + std::chrono::milliseconds(250);
  auto r = json_schema_to_grammar(Json{{"type", "object"}, {"allOf", all}}, o);
  const double ms = std::chrono::duration<double, std::milli>(ThreadCpuClock::now() - start).count();  // CPU time
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().to_string();
  EXPECT_LT(ms, 2000.0);
  // A grammar whose automaton is too large for the limits fails with a clear message.
  CompileLimits tight;
  tight.max_states = 50;
  auto big = CompiledGrammar::compile(json_schema_to_grammar(std::string_view(
      R"({"type":"string","maxLength":400})"), {}).value(), small_vocab().vocab, tight);
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("exceeds 50 automaton states"), std::string::npos) << big.status().message();
}

}  // namespace
}  // namespace deepinfer::grammar

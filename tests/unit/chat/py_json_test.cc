// py_json must read like Python's json.loads and write like json.dumps(ensure_ascii=False): the
// expected strings below were produced by CPython 3.11.
#include "tokenizer/chat/py_json.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deepinfer::chat::pyjson {
namespace {

std::string roundtrip(std::string_view text) {
  auto v = parse(text);
  EXPECT_TRUE(v.is_ok()) << text << ": " << v.status().to_string();
  return v.is_ok() ? dump(*v) : std::string();
}

TEST(ChatPyJsonTest, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {1.5e-05, "1.5e-05"},
      {0.0001, "0.0001"},
      {0.1, "0.1"},
      {1.0 / 3.0, "0.3333333333333333"},
      {-0.0, "-0.0"},
      {123.456, "123.456"},
      {2.5e-300, "2.5e-300"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {1e22, "1e+22"},
      {12345678901234567890.0, "1.2345678901234567e+19"},
      {100.0, "100.0"},
      {0.00012345, "0.00012345"},
      {1e-5, "1e-05"},
      {HUGE_VAL, "Infinity"},
      {-HUGE_VAL, "-Infinity"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(float_repr(value), expected) << expected;
  EXPECT_EQ(float_repr(std::nan("")), "NaN");
}

TEST(ChatPyJsonTest, DumpMatchesPythonForMixedDocument) {
  std::string src =
      R"({"a": 1, "b": [true, false, null, -0, 1.0e2, 123456789012345678901234567890, 1E400],)"
      R"( "a": "x\u0001\u001f\u007f\u2028é/\\\"\n\t\b\f\r", "c": {}, "d": []})";
  // Python: the repeated key "a" keeps its first position and takes the last value; -0 -> 0;
  // 1.0e2 -> 100.0; big ints exact; 1E400 -> Infinity; DEL and U+2028 are not escaped.
  std::string expected =
      "{\"a\": \"x\\u0001\\u001f\x7f\xE2\x80\xA8\xC3\xA9/\\\\\\\"\\n\\t\\b\\f\\r\", \"b\": [true, "
      "false, null, 0, 100.0, 123456789012345678901234567890, Infinity], \"c\": {}, \"d\": []}";
  EXPECT_EQ(roundtrip(src), expected);
}

TEST(ChatPyJsonTest, WhitespaceAndSeparators) {
  EXPECT_EQ(roundtrip(" [ 1 , {\"k\" :\"v\"} ] "), "[1, {\"k\": \"v\"}]");
  EXPECT_EQ(roundtrip("{\"x\":[1,2,{\"y\":null}]}"), "{\"x\": [1, 2, {\"y\": null}]}");
}

TEST(ChatPyJsonTest, UnicodeEscapes) {
  EXPECT_EQ(roundtrip(R"("\ud83d\ude00")"), "\"\xF0\x9F\x98\x80\"");
  EXPECT_EQ(roundtrip(R"("\u00e9\u4e2d")"), "\"\xC3\xA9\xE4\xB8\xAD\"");
  // A lone surrogate cannot be UTF-8: it becomes U+FFFD.
  EXPECT_EQ(roundtrip(R"("\ud800x")"), "\"\xEF\xBF\xBDx\"");
}

TEST(ChatPyJsonTest, RejectsWhatPythonRejects) {
  for (const char* bad : {"[1,]", "{'a':1}", "01", "1 2", "", "[", "{\"a\" 1}", "nul", "\"\\x\"",
                          "1.", "-", ".5", "\"a\x01\"", "\"\xff\""}) {
    EXPECT_FALSE(parse(bad).is_ok()) << bad;
  }
  std::string deep(600, '[');
  EXPECT_FALSE(parse(deep + std::string(600, ']')).is_ok());
  EXPECT_TRUE(parse(std::string(100, '[') + std::string(100, ']')).is_ok());
}

TEST(ChatPyJsonTest, ErrorNamesOffset) {
  auto v = parse("[1, 2,, 3]");
  ASSERT_FALSE(v.is_ok());
  EXPECT_EQ(v.status().message(), "invalid JSON at byte 6: expecting a value");
}

TEST(ChatPyJsonTest, Truthiness) {
  EXPECT_FALSE(parse("{}")->truthy());
  EXPECT_FALSE(parse("0")->truthy());
  EXPECT_FALSE(parse("0.0")->truthy());
  EXPECT_FALSE(parse("\"\"")->truthy());
  EXPECT_TRUE(parse("{\"type\": \"text\"}")->truthy());
  EXPECT_TRUE(parse("-1")->truthy());
}

}  // namespace
}  // namespace deepinfer::chat::pyjson

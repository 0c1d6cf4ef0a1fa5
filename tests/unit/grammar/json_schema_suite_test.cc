// JSON-Schema-Test-Suite conformance (Debian package json-schema-test-suite, drafts 4/6/7): for
// each case whose schema compiles, the instances the matcher accepts (driven token by token over
// the serialized instance) must be exactly the valid ones; schemas with unsupported keywords
// must fail to compile with an error naming the keyword. Invalid instances accepted ("false
// positives") must be zero; pass counts are a ratchet (they may only go up).
// DI_SUITE_VERBOSE=1 prints every mismatch.
#include <gtest/gtest.h>

#include "suite_runner.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

testing::SuiteVocab small() {
  return {testing::small_vocab().vocab, [](const std::string& text) { return testing::small_vocab().tokenize(text); }, true};
}

constexpr testing::Mode kCompactAnyOrder{"compact/any-order", false, true, -1};
constexpr testing::Mode kIndentedFlexible{"indented/flexible-ws/any-order", true, true, 4};
constexpr testing::Mode kCompactSchemaOrder{"compact/schema-order", false, false, -1};

// Baselines (ratchet): raise them when support grows, never lower them.
TEST(JsonSchemaSuite, Draft7Compact) {
  const testing::Stats st = testing::run_suite("draft7", SchemaDraft::kDraft7, kCompactAnyOrder, false, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
  EXPECT_GE(st.passed, 299);
  EXPECT_LE(st.unsupported, 42);
}

TEST(JsonSchemaSuite, Draft7IndentedFlexibleWhitespace) {
  const testing::Stats st = testing::run_suite("draft7", SchemaDraft::kDraft7, kIndentedFlexible, false, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
  EXPECT_GE(st.passed, 299);
}

TEST(JsonSchemaSuite, Draft7SchemaOrderNeverAcceptsInvalid) {
  // Schema order rejects valid instances whose keys come in another order (false negatives by
  // design); it must still never accept an invalid one.
  const testing::Stats st = testing::run_suite("draft7", SchemaDraft::kDraft7, kCompactSchemaOrder, false, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft6Compact) {
  const testing::Stats st = testing::run_suite("draft6", SchemaDraft::kDraft7, kCompactAnyOrder, false, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft4Compact) {
  const testing::Stats st = testing::run_suite("draft4", SchemaDraft::kDraft4, kCompactAnyOrder, false, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft7Formats) {
  const testing::Stats st = testing::run_suite("draft7", SchemaDraft::kDraft7, kCompactAnyOrder, true, small());
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

}  // namespace
}  // namespace deepinfer::grammar

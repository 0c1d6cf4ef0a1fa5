// JSON-Schema-Test-Suite conformance (Debian package json-schema-test-suite, drafts 4/6/7): for
// each case whose schema compiles, the instances the matcher accepts (driven token by token over
// the serialized instance) must be exactly the valid ones; schemas with unsupported keywords
// must fail to compile with an error naming the keyword. Invalid instances accepted ("false
// positives") must be zero; pass counts are a ratchet (they may only go up).
// DI_SUITE_VERBOSE=1 prints every mismatch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "grammar/json_schema.h"
#include "test_vocab.h"

namespace deepinfer::grammar {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSuiteRoot = "/usr/share/json-schema-test-suite/tests";

struct Mode {
  const char* name;
  bool flexible;
  bool any_order;
  int indent;  // -1: compact dump
};

struct Stats {
  int cases = 0, compiled = 0, unsupported = 0, other_errors = 0;
  int tests = 0, passed = 0, false_positives = 0, false_negatives = 0, skipped_tests = 0;
  std::map<std::string, int> unsupported_by_reason;
  std::vector<std::string> failures;
};

bool accepts_text(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  return testing::accepts(g, testing::small_vocab(), text, /*check_masks=*/false);
}

std::string reason_of(const std::string& message) {
  for (const char* key : {"keyword '", "format '", "$ref '"}) {
    const auto p = message.find(key);
    if (p != std::string::npos) {
      const auto q = message.find('\'', p + std::string(key).size());
      return message.substr(p, q - p + 1);
    }
  }
  return message.substr(0, 60);
}

void run_file(const fs::path& file, SchemaDraft draft, const Mode& mode, Stats& st) {
  std::ifstream in(file);
  const Json cases = Json::parse(in);
  for (const auto& c : cases) {
    ++st.cases;
    JsonSchemaOptions o;
    o.draft = draft;
    o.flexible_whitespace = mode.flexible;
    o.any_order = mode.any_order;
    auto grammar = json_schema_to_grammar(c["schema"], o);
    std::shared_ptr<const CompiledGrammar> g;
    Status error = grammar.status();
    if (grammar.is_ok()) {
      auto compiled = CompiledGrammar::compile(std::move(*grammar), testing::small_vocab().vocab);
      if (compiled.is_ok()) g = *compiled; else error = compiled.status();
    }
    const std::string where = file.filename().string() + " / " + c["description"].get<std::string>();
    if (!g && error.message().find("unsatisfiable") != std::string::npos) {
      // A schema no instance satisfies: the compile error is the right answer when every test
      // instance is invalid.
      ++st.compiled;
      for (const auto& t : c["tests"]) {
        ++st.tests;
        if (!t["valid"].get<bool>()) { ++st.passed; continue; }
        ++st.false_negatives;
        st.failures.push_back("false negative (unsatisfiable): " + where + " / " + t["description"].get<std::string>());
      }
      continue;
    }
    if (!g) {
      if (error.code() == StatusCode::kUnimplemented) {
        ++st.unsupported;
        ++st.unsupported_by_reason[reason_of(error.message())];
      } else {
        ++st.other_errors;
        st.failures.push_back("compile error: " + where + ": " + error.message());
      }
      st.skipped_tests += static_cast<int>(c["tests"].size());
      continue;
    }
    ++st.compiled;
    for (const auto& t : c["tests"]) {
      ++st.tests;
      const std::string text = mode.indent < 0 ? t["data"].dump() : t["data"].dump(mode.indent);
      const bool valid = t["valid"].get<bool>();
      const bool accepted = accepts_text(g, text);
      if (accepted == valid) { ++st.passed; continue; }
      (accepted ? st.false_positives : st.false_negatives)++;
      st.failures.push_back(std::string(accepted ? "FALSE POSITIVE: " : "false negative: ") + where + " / " +
                            t["description"].get<std::string>() + " : " + text);
    }
  }
}

Stats run_suite(const std::string& draft_dir, SchemaDraft draft, const Mode& mode, bool formats) {
  Stats st;
  std::vector<fs::path> files;
  const fs::path dir = formats ? fs::path(kSuiteRoot) / draft_dir / "optional" / "format" : fs::path(kSuiteRoot) / draft_dir;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) run_file(f, draft, mode, st);
  const bool verbose = std::getenv("DI_SUITE_VERBOSE") != nullptr;
  std::printf("%s %s%s: cases %d (compiled %d, unsupported %d, other errors %d); tests %d: passed %d, "
              "false positives %d, false negatives %d; tests skipped (unsupported) %d\n",
              draft_dir.c_str(), mode.name, formats ? " formats" : "", st.cases, st.compiled, st.unsupported,
              st.other_errors, st.tests, st.passed, st.false_positives, st.false_negatives, st.skipped_tests);
  if (verbose) {
    for (const auto& [r, n] : st.unsupported_by_reason) std::printf("  unsupported %3d  %s\n", n, r.c_str());
    for (const auto& f : st.failures) std::printf("  %s\n", f.c_str());
  }
  return st;
}

constexpr Mode kCompactAnyOrder{"compact/any-order", false, true, -1};
constexpr Mode kIndentedFlexible{"indented/flexible-ws/any-order", true, true, 4};
constexpr Mode kCompactSchemaOrder{"compact/schema-order", false, false, -1};

// Baselines (ratchet): raise them when support grows, never lower them.
TEST(JsonSchemaSuite, Draft7Compact) {
  const Stats st = run_suite("draft7", SchemaDraft::kDraft7, kCompactAnyOrder, false);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
  EXPECT_GE(st.passed, 299);
  EXPECT_LE(st.unsupported, 42);
}

TEST(JsonSchemaSuite, Draft7IndentedFlexibleWhitespace) {
  const Stats st = run_suite("draft7", SchemaDraft::kDraft7, kIndentedFlexible, false);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
  EXPECT_GE(st.passed, 299);
}

TEST(JsonSchemaSuite, Draft7SchemaOrderNeverAcceptsInvalid) {
  // Schema order rejects valid instances whose keys come in another order (false negatives by
  // design); it must still never accept an invalid one.
  const Stats st = run_suite("draft7", SchemaDraft::kDraft7, kCompactSchemaOrder, false);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft6Compact) {
  const Stats st = run_suite("draft6", SchemaDraft::kDraft7, kCompactAnyOrder, false);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft4Compact) {
  const Stats st = run_suite("draft4", SchemaDraft::kDraft4, kCompactAnyOrder, false);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

TEST(JsonSchemaSuite, Draft7Formats) {
  const Stats st = run_suite("draft7", SchemaDraft::kDraft7, kCompactAnyOrder, true);
  EXPECT_EQ(st.false_positives, 0);
  EXPECT_EQ(st.other_errors, 0);
}

}  // namespace
}  // namespace deepinfer::grammar

// JSON-Schema-Test-Suite runner (see suite_runner.h).
#include "suite_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "grammar/matcher.h"

namespace deepinfer::grammar::testing {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSuiteRoot = "/usr/share/json-schema-test-suite/tests";

// Drives the matcher over the tokens of `text`; with check_masks each token's bit must equal
// whether accept() takes it.
bool accepts_text(const std::shared_ptr<const CompiledGrammar>& g, const SuiteVocab& sv, const std::string& text) {
  Matcher m(g);
  std::vector<uint32_t> mask(static_cast<size_t>(m.n_words()));
  auto step = [&](int32_t t) {
    bool bit = true;
    if (sv.check_masks) {
      EXPECT_TRUE(m.fill_bitmask(mask).is_ok());
      bit = (mask[t >> 5] >> (t & 31)) & 1u;
    }
    const bool ok = m.accept(t);
    if (sv.check_masks) {
      EXPECT_EQ(bit, ok) << "token " << t << " of " << text;
    }
    return ok;
  };
  for (int32_t t : sv.tokenize(text)) if (!step(t)) return false;
  return step(g->vocab().eos_id());
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

// assert_formats: the suite's optional/format cases treat "format" as an assertion, so an unknown
// format must fail to compile there (strict) rather than accept every string.
void run_file(const fs::path& file, SchemaDraft draft, const Mode& mode, const SuiteVocab& sv, bool assert_formats,
              Stats& st) {
  std::ifstream in(file);
  const Json cases = Json::parse(in);
  for (const auto& c : cases) {
    ++st.cases;
    JsonSchemaOptions o;
    o.draft = draft;
    o.flexible_whitespace = mode.flexible;
    o.any_order = mode.any_order;
    o.unknown_formats_are_annotations = !assert_formats;
    auto grammar = json_schema_to_grammar(c["schema"], o);
    std::shared_ptr<const CompiledGrammar> g;
    Status error = grammar.status();
    if (grammar.is_ok()) {
      auto compiled = CompiledGrammar::compile(std::move(*grammar), sv.vocab);
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
      const bool accepted = accepts_text(g, sv, text);
      if (accepted == valid) { ++st.passed; continue; }
      (accepted ? st.false_positives : st.false_negatives)++;
      st.failures.push_back(std::string(accepted ? "FALSE POSITIVE: " : "false negative: ") + where + " / " +
                            t["description"].get<std::string>() + " : " + text);
    }
  }
}

}  // namespace

Stats run_suite(const std::string& draft_dir, SchemaDraft draft, const Mode& mode, bool formats,
                const SuiteVocab& sv) {
  Stats st;
  std::vector<fs::path> files;
  const fs::path dir = formats ? fs::path(kSuiteRoot) / draft_dir / "optional" / "format" : fs::path(kSuiteRoot) / draft_dir;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) run_file(f, draft, mode, sv, formats, st);
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


}  // namespace deepinfer::grammar::testing

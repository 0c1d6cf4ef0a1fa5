// JSON-Schema-Test-Suite runner shared by the small-vocabulary and real-tokenizer tests: compiles
// each case's schema, serializes every instance (compact or indented), tokenizes it with the given
// function, drives a matcher (optionally checking each token against the bitmask) and counts
// passes, false positives/negatives and schemas rejected as unsupported.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar::testing {

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

struct SuiteVocab {
  std::shared_ptr<const Vocabulary> vocab;
  std::function<std::vector<int32_t>(const std::string&)> tokenize;
  bool check_masks = false;  // every instance token must agree with the bitmask
};

// Runs tests/<draft_dir> (or its optional/format with formats=true); prints a summary line and,
// with DI_SUITE_VERBOSE set, every mismatch.
Stats run_suite(const std::string& draft_dir, SchemaDraft draft, const Mode& mode, bool formats,
                const SuiteVocab& sv);

}  // namespace deepinfer::grammar::testing

// Deterministic generator of realistic JSON schemas (API payloads, tool arguments, records:
// nested objects, optional fields, enums, formats, patterns, bounded strings and numbers, arrays,
// nullable anyOf, $defs references) and of a valid instance for each, for grammar benchmarks.
// Same seed, same schemas and instances on every machine.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::bench {

using OJson = nlohmann::ordered_json;

struct GeneratedCase {
  OJson schema;
  OJson instance;
};

class SchemaGenerator {
 public:
  explicit SchemaGenerator(uint64_t seed) : rng_(seed) {}
  GeneratedCase next();

 private:
  OJson object_schema(int depth, int min_props, int max_props);
  OJson value_schema(int depth);
  OJson string_schema();
  OJson instance_of(const OJson& schema, const OJson& root, int depth);
  std::string text(int min_chars, int max_chars);
  std::string pattern_example(const std::string& pattern);
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::mt19937_64 rng_;
  int counter_ = 0;
};

}  // namespace deepinfer::bench

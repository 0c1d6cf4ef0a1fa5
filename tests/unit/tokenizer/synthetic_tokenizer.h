// Test helper: writes small, hand-made byte-level BPE tokenizer.json files so that unit tests can
// pin exact ids without the real 128k vocabulary. Ids 0..255 are the single bytes (in byte
// order); merged tokens follow in merge order from 256; added tokens get the ids they are given.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::testing_tokenizer {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special = true;
  bool lstrip = false;
  bool rstrip = false;
};

struct SyntheticSpec {
  // Merges in rank order, as raw byte strings (converted to byte-level text here).
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added;
  std::vector<std::string> split_regexes = {" ?[A-Za-z]+|\\s+(?!\\S)|\\s+|[0-9]|[^A-Za-z0-9\\s]+"};
  bool merges_as_pairs = false;  // tokenizers >= 0.20 format [["a","b"], ...]
};

// Byte-level text of raw bytes (the GPT-2 byte↔unicode map, written independently of the
// library so the tests check it rather than reuse it).
std::string to_byte_level(const std::string& bytes);

// The tokenizer.json document for `spec`.
nlohmann::json make_tokenizer_json(const SyntheticSpec& spec);

// Writes `contents` to a fresh file under the gtest temp dir and returns its path.
std::string write_temp_file(const std::string& name, const std::string& contents);

// The id a merge gets: 256 + its index in spec.merges (the joined text's first occurrence).
int32_t merged_id(const SyntheticSpec& spec, const std::string& joined_bytes);

}  // namespace deepinfer::testing_tokenizer

// Synthetic tokenizer.json builder (see synthetic_tokenizer.h).
#include "synthetic_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace deepinfer::testing_tokenizer {

std::string to_byte_level(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    // Printable Latin-1 maps to itself; the other 68 bytes to U+0100.. in byte order.
    uint32_t cp = b;
    const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (!self) {
      uint32_t k = 0;
      for (uint32_t x = 0; x < b; ++x) {
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++k;
      }
      cp = 256 + k;
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

nlohmann::json make_tokenizer_json(const SyntheticSpec& spec) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merges = nlohmann::json::array();
  int32_t next_id = 256;
  for (const auto& [left, right] : spec.merges) {
    const std::string l = to_byte_level(left), r = to_byte_level(right);
    if (!vocab.contains(l + r)) vocab[l + r] = next_id++;
    if (spec.merges_as_pairs) {
      merges.push_back({l, r});
    } else {
      merges.push_back(l + " " + r);
    }
  }
  nlohmann::json added = nlohmann::json::array();
  for (const auto& a : spec.added) {
    added.push_back({{"id", a.id},
                     {"content", a.content},
                     {"single_word", false},
                     {"lstrip", a.lstrip},
                     {"rstrip", a.rstrip},
                     {"normalized", false},
                     {"special", a.special}});
  }
  nlohmann::json splits = nlohmann::json::array();
  for (const auto& re : spec.split_regexes) {
    splits.push_back({{"type", "Split"},
                      {"pattern", {{"Regex", re}}},
                      {"behavior", "Isolated"},
                      {"invert", false}});
  }
  splits.push_back({{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", false}});
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}}},
          {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", splits}}},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

std::string write_temp_file(const std::string& name, const std::string& contents) {
  // ctest runs each test in its own process, possibly in parallel: the pid keeps dirs apart.
  static int counter = 0;
  const std::string dir = ::testing::TempDir() + "tokenizer_test_" + std::to_string(::getpid()) +
                          "_" + std::to_string(++counter);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

int32_t merged_id(const SyntheticSpec& spec, const std::string& joined_bytes) {
  std::map<std::string, int32_t> ids;
  int32_t next_id = 256;
  for (const auto& [left, right] : spec.merges) {
    if (!ids.count(left + right)) ids[left + right] = next_id++;
  }
  const auto it = ids.find(joined_bytes);
  return it == ids.end() ? -1 : it->second;
}

}  // namespace deepinfer::testing_tokenizer

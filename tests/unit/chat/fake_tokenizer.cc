// FakeTokenizer (see fake_tokenizer.h).
#include "fake_tokenizer.h"

#include <algorithm>

namespace deepinfer::chat::testing {

const std::vector<std::pair<std::string, int32_t>>& deepseek_specials() {
  static const std::vector<std::pair<std::string, int32_t>> kSpecials = {
      {"<｜begin▁of▁sentence｜>", 0}, {"<｜end▁of▁sentence｜>", 1}, {"<｜▁pad▁｜>", 2},
      {"<｜System｜>", 128799},       {"<｜User｜>", 128803},       {"<｜Assistant｜>", 128804},
      {"<think>", 128821},            {"</think>", 128822},          {"｜DSML｜", 128825},
      {"<｜latest_reminder｜>", 128828}, {"<｜action｜>", 128829},    {"<｜query｜>", 128830},
      {"<｜authority｜>", 128831},    {"<｜domain｜>", 128832},      {"<｜title｜>", 128836},
      {"<｜read_url｜>", 128845},     {"<｜deepseek_image｜>", 129264},
      {"<｜fim▁hole｜>", 128800},     {"<｜tool▁calls▁begin｜>", 128806},
  };
  return kSpecials;
}

FakeTokenizer::FakeTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
  for (const auto& [text, id] : deepseek_specials()) {
    special_to_id_.emplace(text, id);
    id_to_special_.emplace(id, text);
  }
  std::stable_sort(pieces_.begin(), pieces_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void FakeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>* out) const {
  size_t pos = 0;
  while (pos < text.size()) {
    bool matched = false;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      if (text.substr(pos, pieces_[k].size()) == pieces_[k]) {
        out->push_back(kPieceBase + static_cast<int32_t>(k));
        pos += pieces_[k].size();
        matched = true;
        break;
      }
    }
    if (!matched) out->push_back(kByteBase + static_cast<unsigned char>(text[pos++]));
  }
}

std::vector<int32_t> FakeTokenizer::encode(std::string_view text, bool match_special) const {
  std::vector<int32_t> out;
  if (!match_special) {
    encode_plain(text, &out);
    return out;
  }
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    bool hit = false;
    for (const auto& [special, id] : special_to_id_) {
      if (text.substr(pos, special.size()) == special) {
        encode_plain(text.substr(start, pos - start), &out);
        out.push_back(id);
        pos += special.size();
        start = pos;
        hit = true;
        break;
      }
    }
    if (!hit) ++pos;
  }
  encode_plain(text.substr(start), &out);
  return out;
}

std::string FakeTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    out.append(token_bytes(id));
  }
  return out;
}

std::optional<int32_t> FakeTokenizer::token_to_id(std::string_view token) const {
  auto it = special_to_id_.find(token);
  if (it == special_to_id_.end()) return std::nullopt;
  return it->second;
}

std::string FakeTokenizer::token_bytes(int32_t id) const {
  if (auto it = id_to_special_.find(id); it != id_to_special_.end()) return it->second;
  if (id >= kByteBase && id < kByteBase + 256) return std::string(1, static_cast<char>(id - kByteBase));
  if (id >= kPieceBase && id < kPieceBase + static_cast<int32_t>(pieces_.size())) {
    return pieces_[id - kPieceBase];
  }
  return "";
}

}  // namespace deepinfer::chat::testing

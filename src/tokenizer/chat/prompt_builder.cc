// PromptBuilder (see prompt_builder.h).
#include "tokenizer/chat/prompt_builder.h"

namespace deepinfer::chat {

void PromptBuilder::add_special(std::string_view token_text) {
  pieces_.push_back({true, std::string(token_text)});
}

void PromptBuilder::add_text(std::string_view text) {
  if (text.empty()) return;
  if (!pieces_.empty() && !pieces_.back().is_special) {
    pieces_.back().text.append(text);
  } else {
    pieces_.push_back({false, std::string(text)});
  }
}

std::string PromptBuilder::to_text() const {
  std::string out;
  for (const auto& piece : pieces_) out.append(piece.text);
  return out;
}

Result<std::vector<int32_t>> PromptBuilder::to_ids(const Tokenizer& tokenizer) const {
  std::vector<int32_t> ids;
  for (const auto& piece : pieces_) {
    if (piece.is_special) {
      std::optional<int32_t> id = tokenizer.token_to_id(piece.text);
      if (!id) {
        return not_found("tokenizer has no special token {} (wrong tokenizer for this model family?)",
                         piece.text);
      }
      ids.push_back(*id);
    } else {
      std::vector<int32_t> part = tokenizer.encode(piece.text, /*match_special=*/false);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  }
  return ids;
}

}  // namespace deepinfer::chat

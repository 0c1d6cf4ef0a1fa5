// PromptBuilder: the rendered prompt as a sequence of special tokens and text. Specials are only
// ever added explicitly by the renderer (never found by scanning text), which is what makes the
// id form injection-proof: all text, template or client-supplied, is tokenized with special
// matching off, and adjacent text pieces are tokenized together so ids match the reference
// tokenizer on the whole string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "deepinfer/tokenizer.h"

namespace deepinfer::chat {

// The control tokens the renderer emits, by their text form.
namespace special {
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kImage = "<｜deepseek_image｜>";
}  // namespace special

class PromptBuilder {
 public:
  // A control token (one of the special:: texts or a task token).
  void add_special(std::string_view token_text);
  // Text that is tokenized as ordinary bytes, whatever it spells.
  void add_text(std::string_view text);
  // The image placeholder, remembering the image's reference (images(): in placeholder order).
  void add_image(std::string_view ref) {
    add_special(special::kImage);
    images_.emplace_back(ref);
  }
  const std::vector<std::string>& images() const { return images_; }

  std::string to_text() const;
  // Specials by id (token_to_id), each maximal run of text by encode(text, match_special=false).
  Result<std::vector<int32_t>> to_ids(const Tokenizer& tokenizer) const;

 private:
  struct Piece {
    bool is_special;
    std::string text;
  };
  std::vector<Piece> pieces_;  // never two adjacent text pieces
  std::vector<std::string> images_;
};

}  // namespace deepinfer::chat

// BpeTokenizer (see bpe_tokenizer.h): building the id tables from a TokenizerSpec, encode, decode.
#include "tokenizer/bpe_tokenizer.h"

#include "base/log.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {

Result<std::shared_ptr<const BpeTokenizer>> BpeTokenizer::build(const TokenizerSpec& spec,
                                                                const std::string& path,
                                                                const std::string& bos_text,
                                                                const std::string& eos_text) {
  auto tok = std::make_shared<BpeTokenizer>(PrivateTag{});
  DI_RETURN_IF_ERROR(tok->build_ids(spec, path));
  DI_RETURN_IF_ERROR(tok->build_bpe(spec, path));
  DI_ASSIGN_OR_RETURN(tok->pre_tokenizer_, PreTokenizer::create(spec.splits, path));
  for (const AddedTokenSpec& a : spec.added_tokens) {
    tok->added_.add(a.content, a.id, a.lstrip, a.rstrip);
  }
  if (!bos_text.empty()) tok->bos_id_ = tok->token_to_id(bos_text).value_or(-1);
  if (!eos_text.empty()) tok->eos_id_ = tok->token_to_id(eos_text).value_or(-1);
  return std::shared_ptr<const BpeTokenizer>(std::move(tok));
}

// Fills bytes_/kinds_ and the text → id maps. Added tokens first: an id that is both a vocab
// entry and an added token (DeepSeek's ids 0-2) must agree on the text and counts as added.
Status BpeTokenizer::build_ids(const TokenizerSpec& spec, const std::string& path) {
  int64_t max_id = -1;
  for (const auto& [text, id] : spec.vocab) max_id = std::max<int64_t>(max_id, id);
  for (const auto& a : spec.added_tokens) max_id = std::max<int64_t>(max_id, a.id);
  if (max_id < 0) return data_loss("{}: model.vocab is empty", path);
  if (max_id >= kMaxVocab)
    return data_loss("{}: token id {} exceeds the supported {}", path, max_id, kMaxVocab);
  bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  kinds_.assign(static_cast<size_t>(max_id + 1), Kind::kUnassigned);
  for (const auto& a : spec.added_tokens) {
    if (kinds_[a.id] == Kind::kAdded && bytes_[a.id] != a.content) {
      return data_loss("{}: added token id {} is used by both \"{}\" and \"{}\"", path, a.id,
                       bytes_[a.id], a.content);
    }
    kinds_[a.id] = Kind::kAdded;
    bytes_[a.id] = a.content;
    added_ids_[a.content] = a.id;
  }
  size_t n_literal = 0;
  std::string raw;
  vocab_ids_.reserve(spec.vocab.size());
  for (const auto& [text, id] : spec.vocab) {
    if (kinds_[id] == Kind::kAdded) {
      if (bytes_[id] != text) {
        return data_loss("{}: id {} is vocab entry \"{}\" but added token \"{}\"", path, id, text,
                         bytes_[id]);
      }
      continue;
    }
    if (kinds_[id] == Kind::kVocab)
      return data_loss("{}: model.vocab: id {} appears twice", path, id);
    // A piece outside the byte-level alphabet can only be a literal token; keep its text.
    if (!byte_level_to_bytes(text, &raw)) {
      raw = text;
      ++n_literal;
    }
    kinds_[id] = Kind::kVocab;
    bytes_[id] = raw;
    vocab_ids_[text] = id;
  }
  if (n_literal > 0) log_debug("{}: {} vocab entries are not byte-level text", path, n_literal);
  return Status::ok();
}

Status BpeTokenizer::build_bpe(const TokenizerSpec& spec, const std::string& path) {
  std::array<int32_t, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    const std::string text = bytes_to_byte_level(std::string(1, static_cast<char>(b)));
    const auto it = vocab_ids_.find(text);
    if (it == vocab_ids_.end()) {
      return data_loss("{}: model.vocab has no entry for byte 0x{:02X} (\"{}\")", path, b, text);
    }
    byte_ids[b] = it->second;
  }
  MergeTable merges(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    joined = left + right;
    const auto l = vocab_ids_.find(left);
    const auto r = vocab_ids_.find(right);
    const auto m = vocab_ids_.find(joined);
    if (l == vocab_ids_.end() || r == vocab_ids_.end() || m == vocab_ids_.end()) {
      const std::string& missing = l == vocab_ids_.end()   ? left
                                   : r == vocab_ids_.end() ? right
                                                           : joined;
      return data_loss("{}: model.merges[{}] (\"{}\" \"{}\"): \"{}\" is not in model.vocab", path,
                       rank, left, right, missing);
    }
    merges.insert(l->second, r->second, Merge{static_cast<uint32_t>(rank), m->second});
  }
  std::unordered_map<std::string, int32_t> whole_tokens;
  if (spec.ignore_merges) {
    for (const auto& [text, id] : vocab_ids_) whole_tokens.emplace(bytes_[id], id);
  }
  bpe_ = BpeModel(byte_ids, std::move(merges), spec.ignore_merges, std::move(whole_tokens));
  return Status::ok();
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool match_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (!match_special || added_.empty()) {
    encode_ordinary(text, ids);
    return ids;
  }
  size_t pos = 0;
  while (const auto match = added_.find(text, pos)) {
    encode_ordinary(text.substr(pos, match->begin - pos), ids);
    ids.push_back(match->id);
    pos = match->end;
  }
  encode_ordinary(text.substr(pos), ids);
  return ids;
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  // Reused per thread so steady-state encoding does not allocate for the piece list.
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  pre_tokenizer_.split(text, pieces);
  for (std::string_view piece : pieces) {
    if (piece.size() == 1 || piece.size() > BpeCache::kMaxPieceBytes) {
      bpe_.encode_piece(piece, ids);
      continue;
    }
    if (cache_.lookup(piece, ids)) continue;
    const size_t first = ids.size();
    bpe_.encode_piece(piece, ids);
    cache_.insert(piece, ids.data() + first, ids.size() - first);
  }
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string raw;
  for (int32_t id : ids) {
    const Kind k = kind(id);
    if (k == Kind::kUnassigned || (skip_special && k == Kind::kAdded)) continue;
    raw += bytes_[id];
  }
  if (is_valid_utf8(raw)) return raw;
  std::string text;
  text.reserve(raw.size() + 8);
  append_utf8_lossy(text, raw, /*keep_incomplete_tail=*/true);
  return text;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = added_ids_.find(key); it != added_ids_.end()) return it->second;
  if (const auto it = vocab_ids_.find(key); it != vocab_ids_.end()) return it->second;
  return std::nullopt;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  return kind(id) == Kind::kUnassigned ? std::string() : bytes_[id];
}

}  // namespace deepinfer::tokenizer

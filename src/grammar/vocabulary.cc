// Vocabulary construction: token tries (sorted byte strings -> preorder nodes with subtree ends),
// slice lengths and bitsets, the Tokenizer adapter, and the shared leaf-mask cache.
#include "grammar/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "deepinfer/tokenizer.h"
#include "grammar/charset.h"
#include "grammar/mask_cache.h"

namespace deepinfer::grammar {

namespace {
constexpr size_t kMaxSharedMasks = 50'000;
// Also bounded in bytes: a state mask's suffix trie can hold most of the vocabulary (a counted
// [a-z ] repetition's states: ~1.4 MB each at 129K tokens), so 50,000 of them could be ~70 GB.
// A mask under two keys (id and digest) counts twice: the bound errs low.
constexpr size_t kMaxSharedBytes = size_t{1} << 30;

// Number of characters if `bytes` is complete UTF-8 of JSON-safe characters (U+0020 and above,
// except '"' and '\\'), else 255.
uint8_t json_safe_length(const std::string& bytes) {
  size_t pos = 0;
  int n = 0;
  while (pos < bytes.size()) {
    uint32_t cp;
    if (!decode_utf8(bytes, pos, cp) || cp < 0x20 || cp == '"' || cp == '\\') return kUnboundedSlice;
    ++n;
  }
  return static_cast<uint8_t>(std::min(n, 254));
}
}  // namespace

Vocabulary::~Vocabulary() = default;

Result<std::shared_ptr<const Vocabulary>> Vocabulary::create(std::vector<std::string> token_bytes,
                                                             std::vector<uint8_t> special,
                                                             int32_t eos_id, int32_t n_tokens) {
  if (special.size() != token_bytes.size()) {
    return invalid_argument("vocabulary: {} special flags for {} tokens", special.size(), token_bytes.size());
  }
  const auto n_given = static_cast<int32_t>(token_bytes.size());
  if (n_tokens == 0) n_tokens = n_given;
  if (n_tokens < n_given) return invalid_argument("vocabulary: n_tokens {} < {} token strings", n_tokens, n_given);
  if (eos_id < 0 || eos_id >= n_given) return invalid_argument("vocabulary: eos id {} out of range", eos_id);
  auto v = std::shared_ptr<Vocabulary>(new Vocabulary());
  v->n_tokens_ = n_tokens;
  v->eos_id_ = eos_id;
  v->bytes_ = std::move(token_bytes);
  v->special_ = std::move(special);
  v->bytes_.resize(static_cast<size_t>(n_tokens));
  v->special_.resize(static_cast<size_t>(n_tokens), 0);
  v->build_slices();
  v->build_trie();
  v->build_rest_tries();
  return std::shared_ptr<const Vocabulary>(v);
}

Result<std::shared_ptr<const Vocabulary>> Vocabulary::from_tokenizer(const Tokenizer& tokenizer,
                                                                     int32_t n_tokens) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<uint8_t> special(static_cast<size_t>(n), 0);
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = tokenizer.token_bytes(id);
    special[id] = tokenizer.is_special(id) ? 1 : 0;
  }
  return create(std::move(bytes), std::move(special), tokenizer.eos_id(), std::max(n_tokens, n));
}

std::vector<TrieNode> Vocabulary::build_trie_of(const std::vector<int32_t>& ids) const {
  std::vector<TrieNode> trie{{0, -1, 0, 0, 0}};
  std::vector<int32_t> open{0};  // node index per depth along the current path
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = bytes_[id];
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (open.size() > lcp + 1) {
      trie[open.back()].end = static_cast<int32_t>(trie.size());
      open.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      trie.push_back({0, -1, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d]), 0});
      open.push_back(static_cast<int32_t>(trie.size() - 1));
    }
    // Equal byte strings share a node: the first id is stored, the rest chain via dup_next_.
    if (trie[open.back()].token < 0) trie[open.back()].token = id;
    prev = &s;
  }
  while (!open.empty()) {
    trie[open.back()].end = static_cast<int32_t>(trie.size());
    open.pop_back();
  }
  // min_slice bottom-up (children follow their parent in preorder); needs slice_len_.
  if (!slice_len_.empty()) {
    for (int32_t i = static_cast<int32_t>(trie.size()) - 1; i > 0; --i) {
      uint8_t m = kUnboundedSlice;
      if (trie[i].token >= 0) m = slice_len_[trie[i].token] == kUnboundedSlice ? 0 : slice_len_[trie[i].token];
      for (int32_t c = i + 1; c < trie[i].end; c = trie[c].end) m = std::min(m, trie[c].min_slice);
      trie[i].min_slice = m;
    }
  }
  return trie;
}

void Vocabulary::build_trie() {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_tokens_; ++id) {
    if (!special_[id] && !bytes_[id].empty()) ids.push_back(id);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  dup_next_.assign(static_cast<size_t>(n_tokens_), -1);
  for (size_t i = 1; i < ids.size(); ++i) {
    if (bytes_[ids[i]] == bytes_[ids[i - 1]]) dup_next_[ids[i - 1]] = ids[i];
  }
  trie_ = build_trie_of(ids);
  for (const TrieNode& n : trie_) max_token_bytes_ = std::max<int32_t>(max_token_bytes_, n.depth);
}

void Vocabulary::build_rest_tries() {
  for (size_t level = 0; level < kSliceLengths.size(); ++level) {
    // Tokens in trie (sorted) order, minus those of the slice; duplicates follow their first id.
    std::vector<int32_t> ids;
    for (const TrieNode& n : trie_) {
      if (n.token >= 0 && slice_len_[n.token] > kSliceLengths[level]) ids.push_back(n.token);
    }
    rest_[level] = build_trie_of(ids);
  }
}

void Vocabulary::build_slices() {
  slice_len_.assign(static_cast<size_t>(n_tokens_), kUnboundedSlice);
  for (int32_t id = 0; id < n_tokens_; ++id) {
    if (!special_[id] && !bytes_[id].empty()) slice_len_[id] = json_safe_length(bytes_[id]);
  }
  slices_.assign(kSliceLengths.size(), std::vector<uint32_t>(static_cast<size_t>(n_words()), 0));
  for (int32_t id = 0; id < n_tokens_; ++id) {
    const uint8_t len = slice_len_[id];
    if (len == kUnboundedSlice) continue;
    for (size_t l = 0; l < kSliceLengths.size(); ++l) {
      if (len <= kSliceLengths[l]) slices_[l][id >> 5] |= 1u << (id & 31);
    }
  }
}

int Vocabulary::slice_level(uint8_t depth) {
  int level = -1;
  for (size_t l = 0; l < kSliceLengths.size(); ++l) {
    if (kSliceLengths[l] <= depth) level = static_cast<int>(l);
  }
  return level;
}

int32_t Vocabulary::find_special(std::string_view text) const {
  for (int32_t id = 0; id < n_tokens_; ++id) {
    if (special_[id] && bytes_[id] == text) return id;
  }
  return -1;
}

int32_t Vocabulary::find_token(std::string_view bytes) const {
  int32_t node = 0;
  for (char c : bytes) {
    int32_t child = node + 1;
    while (child < trie_[node].end && trie_[child].byte != static_cast<uint8_t>(c)) child = trie_[child].end;
    if (child >= trie_[node].end) { node = -1; break; }
    node = child;
  }
  if (node > 0 && trie_[node].token >= 0) return trie_[node].token;
  return bytes.empty() ? -1 : find_special(bytes);
}

std::shared_ptr<const StateMask> Vocabulary::find_shared(const std::array<uint64_t, 2>& key) const {
  std::lock_guard<std::mutex> lock(shared_mu_);
  auto it = shared_.find(key);
  return it == shared_.end() ? nullptr : it->second;
}

void Vocabulary::put_shared(const std::array<uint64_t, 2>& key, std::shared_ptr<const StateMask> mask) const {
  std::lock_guard<std::mutex> lock(shared_mu_);
  // Bounded: when full, start over (grammars keep the masks they hold alive).
  if (shared_.size() >= kMaxSharedMasks || shared_bytes_ >= kMaxSharedBytes) {
    shared_.clear();
    shared_bytes_ = 0;
  }
  const size_t bytes = mask->memory_bytes();
  if (shared_.emplace(key, std::move(mask)).second) shared_bytes_ += bytes;
}

}  // namespace deepinfer::grammar

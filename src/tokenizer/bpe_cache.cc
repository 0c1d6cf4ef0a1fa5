// BpeCache (see bpe_cache.h): per-thread direct-mapped table.
#include "tokenizer/bpe_cache.h"

#include <atomic>
#include <cstring>
#include <memory>

namespace deepinfer::tokenizer {
namespace {

struct alignas(64) Slot {
  uint64_t owner = 0;  // 0: empty (owner ids start at 1)
  uint32_t hash = 0;
  uint8_t n_bytes = 0;
  uint8_t n_ids = 0;
  char bytes[BpeCache::kMaxPieceBytes];
  int32_t ids[BpeCache::kMaxIds];
};
static_assert(sizeof(Slot) == 64);

std::atomic<uint64_t> g_next_owner{1};

// A small multiply-xorshift hash over 8-byte words; pieces are at most 32 bytes.
uint64_t hash_piece(std::string_view piece) {
  uint64_t h = piece.size() * 0x9E3779B97F4A7C15ull;
  size_t i = 0;
  uint64_t w = 0;
  for (; i + 8 <= piece.size(); i += 8) {
    std::memcpy(&w, piece.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  w = 0;
  std::memcpy(&w, piece.data() + i, piece.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

Slot* thread_slots() {
  thread_local std::unique_ptr<Slot[]> slots(new Slot[BpeCache::kSlots]);
  return slots.get();
}

}  // namespace

BpeCache::BpeCache() : owner_(g_next_owner.fetch_add(1, std::memory_order_relaxed)) {}

bool BpeCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  const uint64_t h = hash_piece(piece);
  const Slot& s = thread_slots()[h % kSlots];
  if (s.owner != owner_ || s.hash != static_cast<uint32_t>(h >> 32) || s.n_bytes != piece.size() ||
      std::memcmp(s.bytes, piece.data(), piece.size()) != 0) {
    return false;
  }
  out.insert(out.end(), s.ids, s.ids + s.n_ids);
  return true;
}

void BpeCache::insert(std::string_view piece, const int32_t* ids, size_t n_ids) const {
  if (piece.size() > kMaxPieceBytes || n_ids > kMaxIds) return;
  const uint64_t h = hash_piece(piece);
  Slot& s = thread_slots()[h % kSlots];
  s.owner = owner_;
  s.hash = static_cast<uint32_t>(h >> 32);
  s.n_bytes = static_cast<uint8_t>(piece.size());
  s.n_ids = static_cast<uint8_t>(n_ids);
  std::memcpy(s.bytes, piece.data(), piece.size());
  std::memcpy(s.ids, ids, n_ids * sizeof(int32_t));
}

}  // namespace deepinfer::tokenizer

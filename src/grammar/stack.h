// Pushdown runtime: parser stacks as hash-consed persistent frames (rule, DFA state, parent), so
// equal stacks have equal ids (configurations compare and memoize by id, rollback is dropping a
// configuration) and the Stepper that advances a configuration (set of stacks) over one byte or
// token terminal, expanding calls and returns. A scratch arena may sit on top of a base arena
// (read-only) so mask walks never grow the matcher's arena.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace deepinfer::grammar {

inline constexpr int32_t kBottom = -1;   // parent of the root rule's frame
inline constexpr int32_t kContext = -2;  // parent placeholder for "unknown caller" (cache walks)

struct Frame {
  int32_t parent;
  int32_t rule;
  int32_t state;
};

class StackArena {
 public:
  explicit StackArena(const StackArena* base = nullptr);
  int32_t make(int32_t parent, int32_t rule, int32_t state);
  const Frame& frame(int32_t id) const {
    return id < offset_ ? base_->frame(id) : frames_[static_cast<size_t>(id - offset_)];
  }
  // Forgets this arena's own frames (the base is untouched).
  void clear();
  size_t n_frames() const { return frames_.size(); }

 private:
  int32_t find(int32_t parent, int32_t rule, int32_t state) const;
  void grow();
  static uint64_t hash(int32_t parent, int32_t rule, int32_t state) {
    uint64_t h = static_cast<uint32_t>(parent) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(rule)) << 32 | static_cast<uint32_t>(state)) * 0xC2B2AE3D27D4EB4Full;
    return h ^ (h >> 29);
  }

  const StackArena* base_;
  int32_t offset_;
  std::vector<Frame> frames_;
  std::vector<int32_t> slots_;  // open addressing: frame index + 1, 0 = empty
};

class Stepper {
 public:
  Stepper(const CompiledGrammar& grammar, StackArena& arena) : g_(grammar), arena_(arena) {}
  // Advances every stack of `in` over `symbol` (a byte 0..255, or 256 + terminal index); `out`
  // receives the resulting stacks, sorted and unique. Returns false if `out` would exceed the cap.
  bool step(std::span<const int32_t> in, int32_t symbol, std::vector<int32_t>& out);
  // Whether the stack can pop every frame down to `bottom` (kBottom: the grammar may end here;
  // kContext: the cache walk's rule may return) without reading anything.
  bool can_finish(int32_t stack, int32_t bottom) const;
  bool can_finish_any(std::span<const int32_t> stacks, int32_t bottom) const {
    for (int32_t s : stacks) if (can_finish(s, bottom)) return true;
    return false;
  }

  static constexpr size_t kMaxStacks = 4096;

 private:
  void visit(int32_t stack, int32_t symbol, std::vector<int32_t>& out);

  const CompiledGrammar& g_;
  StackArena& arena_;
  std::vector<int32_t> visited_;
};

}  // namespace deepinfer::grammar

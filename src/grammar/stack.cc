// StackArena (open-addressing hash-consing of frames) and Stepper (one-symbol advance of a set of
// stacks: read in the top frame, push callees at the top state, pop completed frames).
#include "grammar/stack.h"

#include <algorithm>

namespace deepinfer::grammar {

StackArena::StackArena(const StackArena* base)
    : base_(base), offset_(base ? static_cast<int32_t>(base->offset_ + base->frames_.size()) : 0) {
  slots_.assign(64, 0);
}

void StackArena::clear() {
  frames_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

int32_t StackArena::find(int32_t parent, int32_t rule, int32_t state) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash(parent, rule, state) & mask;; i = (i + 1) & mask) {
    const int32_t slot = slots_[i];
    if (slot == 0) return -1;
    const Frame& f = frames_[static_cast<size_t>(slot - 1)];
    if (f.parent == parent && f.rule == rule && f.state == state) return offset_ + slot - 1;
  }
}

void StackArena::grow() {
  std::vector<int32_t> old(slots_.size() * 2, 0);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (size_t k = 0; k < frames_.size(); ++k) {
    const Frame& f = frames_[k];
    size_t i = hash(f.parent, f.rule, f.state) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = static_cast<int32_t>(k + 1);
  }
}

int32_t StackArena::make(int32_t parent, int32_t rule, int32_t state) {
  if (base_) {
    const int32_t id = base_->find(parent, rule, state);
    if (id >= 0) return id;
  }
  const int32_t id = find(parent, rule, state);
  if (id >= 0) return id;
  if ((frames_.size() + 1) * 2 > slots_.size()) grow();
  frames_.push_back({parent, rule, state});
  const size_t mask = slots_.size() - 1;
  size_t i = hash(parent, rule, state) & mask;
  while (slots_[i] != 0) i = (i + 1) & mask;
  slots_[i] = static_cast<int32_t>(frames_.size());
  return offset_ + static_cast<int32_t>(frames_.size() - 1);
}

bool Stepper::step(std::span<const int32_t> in, int32_t symbol, std::vector<int32_t>& out) {
  out.clear();
  visited_.clear();
  for (int32_t s : in) visit(s, symbol, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out.size() <= kMaxStacks;
}

void Stepper::visit(int32_t stack, int32_t symbol, std::vector<int32_t>& out) {
  if (std::find(visited_.begin(), visited_.end(), stack) != visited_.end()) return;
  visited_.push_back(stack);
  const Frame f = arena_.frame(stack);  // copy: make() may reallocate
  const Dfa& dfa = g_.dfa(f.rule);
  if (symbol < 256) {
    const int32_t t = dfa.next(f.state, static_cast<uint8_t>(symbol));
    if (t >= 0) out.push_back(arena_.make(f.parent, f.rule, t));
  } else {
    for (auto [e, end] = dfa.tokens(f.state); e != end; ++e) {
      if (e->label == symbol - 256) out.push_back(arena_.make(f.parent, f.rule, e->target));
    }
  }
  for (auto [e, end] = dfa.calls(f.state); e != end; ++e) {
    const Dfa& callee = g_.dfa(e->label);
    const int32_t ret = arena_.make(f.parent, f.rule, e->target);
    visit(arena_.make(ret, e->label, callee.start()), symbol, out);
  }
  if (f.parent >= 0 && g_.can_complete(f.rule, f.state)) visit(f.parent, symbol, out);
}

bool Stepper::can_finish(int32_t stack, int32_t bottom) const {
  for (int32_t s = stack; s >= 0;) {
    const Frame& f = arena_.frame(s);
    if (!g_.can_complete(f.rule, f.state)) return false;
    if (f.parent == bottom) return true;
    s = f.parent;
  }
  return false;
}

}  // namespace deepinfer::grammar

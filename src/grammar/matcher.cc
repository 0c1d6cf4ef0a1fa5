// Matcher: accept/rollback over configuration history, and mask assembly — per stack, the cached
// state mask, its callees (pushed in a scratch arena), its caller when the rule may return, and
// the suffix trie walked against the caller; plus token terminals and EOS. Recent masks are
// memoized by configuration (stack ids are canonical), which makes long string bodies cheap.
#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

#include "grammar/mask_cache.h"
#include "grammar/vocabulary.h"

namespace deepinfer::grammar {

namespace {
constexpr size_t kMemoEntries = 4;
constexpr int32_t kMaxJumpForward = 4096;
}  // namespace

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : g_(std::move(grammar)), stepper_(*g_, arena_) {
  reset();
}

void Matcher::reset() {
  history_.clear();
  memo_.clear();
  Config start;
  start.stacks.push_back(arena_.make(kBottom, g_->root(), g_->dfa(g_->root()).start()));
  history_.push_back(std::move(start));
}

int32_t Matcher::n_words() const { return g_->vocab().n_words(); }

bool Matcher::can_terminate() const {
  const Config& c = history_.back();
  return c.terminated || stepper_.can_finish_any(c.stacks, kBottom);
}

bool Matcher::advance(const std::vector<int32_t>& from, std::string_view bytes, std::vector<int32_t>& out) {
  std::vector<int32_t> cur = from, next;
  for (char c : bytes) {
    if (!stepper_.step(cur, static_cast<uint8_t>(c), next) || next.empty()) return false;
    cur.swap(next);
  }
  out = std::move(cur);
  return true;
}

bool Matcher::accept(int32_t token) {
  const Vocabulary& v = g_->vocab();
  const Config& cur = history_.back();
  if (token < 0 || token >= v.n_tokens()) return false;
  if (token == v.eos_id()) {
    // Once ended, EOS stays the only allowed token (it is what the mask offers).
    if (!cur.terminated && !stepper_.can_finish_any(cur.stacks, kBottom)) return false;
    history_.push_back({cur.stacks, true});
    return true;
  }
  if (cur.terminated) return false;
  Config next;
  // Token terminals (matched by id), then the bytes of non-special tokens.
  const auto& terms = g_->terminal_tokens();
  std::vector<int32_t> via_term;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (terms[i] != token) continue;
    if (stepper_.step(cur.stacks, 256 + static_cast<int32_t>(i), via_term)) {
      next.stacks.insert(next.stacks.end(), via_term.begin(), via_term.end());
    }
  }
  if (!v.is_special(token) && !v.token_bytes(token).empty()) {
    std::vector<int32_t> via_bytes;
    if (advance(cur.stacks, v.token_bytes(token), via_bytes)) {
      next.stacks.insert(next.stacks.end(), via_bytes.begin(), via_bytes.end());
    }
  }
  if (next.stacks.empty()) return false;
  std::sort(next.stacks.begin(), next.stacks.end());
  next.stacks.erase(std::unique(next.stacks.begin(), next.stacks.end()), next.stacks.end());
  history_.push_back(std::move(next));
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  const Config& cur = history_.back();
  if (cur.terminated) return false;
  Config next;
  if (!advance(cur.stacks, bytes, next.stacks)) return false;
  history_.push_back(std::move(next));
  return true;
}

Status Matcher::rollback(int32_t n) {
  if (n < 0 || n > n_accepted()) {
    return invalid_argument("grammar matcher: cannot roll back {} tokens ({} accepted)", n, n_accepted());
  }
  history_.resize(history_.size() - static_cast<size_t>(n));
  return Status::ok();
}

Status Matcher::fill_bitmask(std::span<uint32_t> words) {
  const int32_t n = n_words();
  if (static_cast<int32_t>(words.size()) < n) {
    return invalid_argument("grammar bitmask has {} words, needs {}", words.size(), n);
  }
  const Config& config = history_.back();
  // The key: every stack's frames, top to bottom, as (rule, state) — or (rule, class) where the
  // rule's states that no token tells apart are known (CompiledGrammar::frame_class): a counted
  // repetition of a rule (`word{1,100}`, an array's maxItems) is a new state per count, and its
  // tokens that finish the callee part-way are checked against that caller at every step
  // (~1.2 ms at 129K tokens), while the counts far from the end all give one mask.
  const auto for_each_frame = [&](auto&& fn) {
    for (int32_t s : config.stacks) {
      for (int32_t id = s; id >= 0; id = arena_.frame(id).parent) fn(arena_.frame(id));
      fn(Frame{kBottom, kBottom, kBottom});  // a stack's end
    }
  };
  std::vector<int32_t> key;
  for_each_frame([&](const Frame& f) {
    if (f.rule == kBottom) {
      key.push_back(kBottom);
      return;
    }
    const int32_t c = g_->frame_class(f.rule, f.state);
    key.insert(key.end(), {f.rule, c >= 0 ? -3 - c : f.state});  // classes negative, states not
  });
  key.push_back(config.terminated ? -1 : -2);
  for (size_t i = 0; i < memo_.size(); ++i) {
    if (memo_[i].key == key) {
      std::memcpy(words.data(), memo_[i].mask.data(), static_cast<size_t>(n) * 4);
      std::rotate(memo_.begin(), memo_.begin() + static_cast<std::ptrdiff_t>(i), memo_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      std::fill(words.begin() + n, words.end(), 0u);
      return Status::ok();
    }
  }
  std::fill(words.begin(), words.end(), 0u);
  compute_mask(config, words.data());
  for_each_frame([&](const Frame& f) {
    if (f.rule != kBottom) g_->note_frame_miss(f.rule);
  });
  if (memo_.size() >= kMemoEntries) memo_.pop_back();
  memo_.insert(memo_.begin(), MemoEntry{std::move(key), std::vector<uint32_t>(words.begin(), words.begin() + n)});
  return Status::ok();
}

void Matcher::compute_mask(const Config& config, uint32_t* mask) {
  const Vocabulary& v = g_->vocab();
  const int32_t eos = v.eos_id();
  if (config.terminated) {
    mask[eos >> 5] |= 1u << (eos & 31);
    return;
  }
  StackArena scratch(&arena_);
  Stepper stepper(*g_, scratch);
  visited_.clear();
  for (int32_t s : config.stacks) add_stack(s, mask, scratch, stepper);
  // Ids past the vocabulary's byte strings are never set by the walks; specials only here.
  const auto& terms = g_->terminal_tokens();
  std::vector<int32_t> out;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (stepper.step(config.stacks, 256 + static_cast<int32_t>(i), out) && !out.empty()) {
      mask[terms[i] >> 5] |= 1u << (terms[i] & 31);
    }
  }
  if (stepper.can_finish_any(config.stacks, kBottom)) mask[eos >> 5] |= 1u << (eos & 31);
}

void Matcher::add_stack(int32_t stack, uint32_t* mask, StackArena& arena, Stepper& stepper) {
  if (std::find(visited_.begin(), visited_.end(), stack) != visited_.end()) return;
  visited_.push_back(stack);
  const Frame f = arena.frame(stack);
  const StateMask& m = g_->state_mask(f.rule, f.state);
  m.or_into(mask, g_->vocab());
  if (f.parent >= 0) {
    if (m.exit_at_root) add_stack(f.parent, mask, arena, stepper);
    if (!m.suffixes.empty()) walk_suffixes(m.suffixes, f.parent, mask, stepper);
  }
  const Dfa& dfa = g_->dfa(f.rule);
  for (auto [e, end] = dfa.calls(f.state); e != end; ++e) {
    const int32_t ret = arena.make(f.parent, f.rule, e->target);
    add_stack(arena.make(ret, e->label, g_->dfa(e->label).start()), mask, arena, stepper);
  }
}

void Matcher::walk_suffixes(const SuffixTrie& trie, int32_t parent, uint32_t* mask, Stepper& stepper) {
  if (walk_cfg_.empty()) walk_cfg_.resize(1);
  walk_cfg_[0].assign(1, parent);
  const int32_t n = static_cast<int32_t>(trie.nodes.size());
  for (int32_t i = 1; i < n;) {
    const SuffixTrie::Node& node = trie.nodes[i];
    if (walk_cfg_.size() <= node.depth) walk_cfg_.resize(node.depth + 1);
    auto& cfg = walk_cfg_[node.depth];
    if (!stepper.step(walk_cfg_[node.depth - 1], node.byte, cfg) || cfg.empty()) {
      i = node.end;
      continue;
    }
    for (int32_t k = node.tok_begin; k < node.tok_end; ++k) {
      const int32_t t = trie.tokens[k];
      mask[t >> 5] |= 1u << (t & 31);
    }
    ++i;
  }
}

std::string Matcher::find_jump_forward_string() {
  std::string out;
  if (is_terminated()) return out;
  StackArena scratch(&arena_);
  Stepper stepper(*g_, scratch);
  std::vector<int32_t> cur = history_.back().stacks, next, forced;
  const size_t n_terms = g_->terminal_tokens().size();
  while (static_cast<int32_t>(out.size()) < kMaxJumpForward) {
    if (stepper.can_finish_any(cur, kBottom)) break;
    bool choice = false;
    for (size_t i = 0; i < n_terms && !choice; ++i) {
      choice = stepper.step(cur, 256 + static_cast<int32_t>(i), next) && !next.empty();
    }
    int n_options = 0;
    int forced_byte = -1;
    for (int b = 0; b < 256 && !choice; ++b) {
      if (stepper.step(cur, b, next) && !next.empty()) {
        if (++n_options > 1) choice = true;
        forced_byte = b;
        forced.swap(next);
      }
    }
    if (choice || n_options != 1) break;
    out.push_back(static_cast<char>(forced_byte));
    cur.swap(forced);
  }
  return out;
}

}  // namespace deepinfer::grammar

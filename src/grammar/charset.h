// Code-point sets (sorted disjoint inclusive ranges over U+0000..U+10FFFF) and their UTF-8 byte
// encoding as sequences of byte ranges. Everything above the byte level of the grammar engine
// (regex classes, EBNF classes, JSON string alphabets) is expressed as CodepointSets; the automaton
// builder turns them into byte transitions with utf8_sequences(). Surrogates (U+D800..U+DFFF)
// have no UTF-8 encoding and are dropped at that point.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet single(uint32_t cp) { return range(cp, cp); }
  static CodepointSet range(uint32_t lo, uint32_t hi);
  static CodepointSet all() { return range(0, kMaxCodepoint); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& other);
  CodepointSet negated() const;
  CodepointSet intersected(const CodepointSet& other) const;
  CodepointSet minus(const CodepointSet& other) const { return intersected(other.negated()); }
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  uint64_t size() const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const CodepointSet& other) const { return ranges_ == other.ranges_; }

  // ECMAScript classes: \d, \w, \s (the negations are .negated()).
  static CodepointSet digit();
  static CodepointSet word();
  static CodepointSet space();
  // ECMAScript '.': everything except \n, \r, U+2028, U+2029.
  static CodepointSet dot();

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // sorted, disjoint, non-adjacent
};

// One UTF-8 byte-range sequence: byte i of a matching encoding lies in ranges[i].
struct Utf8Sequence {
  int n = 0;
  uint8_t lo[4] = {0, 0, 0, 0};
  uint8_t hi[4] = {0, 0, 0, 0};
};

// The UTF-8 encodings of exactly the code points in [lo, hi] (minus surrogates), as a list of
// byte-range sequences; the sequences are disjoint and their union is the whole encoded set.
std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi);

// Appends the UTF-8 encoding of cp (cp must not be a surrogate and must be <= kMaxCodepoint).
void append_utf8(uint32_t cp, std::string& out);

// Decodes one code point at text[pos]; returns false on invalid UTF-8 (pos is unchanged then).
bool decode_utf8(const std::string& text, size_t& pos, uint32_t& cp);

}  // namespace deepinfer::grammar

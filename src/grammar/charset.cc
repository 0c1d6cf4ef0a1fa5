// CodepointSet algebra and UTF-8 range splitting (the classic split-by-encoded-length-then-by-
// continuation-byte-boundary method; each resulting sequence is a box of byte ranges).
#include "grammar/charset.h"

#include <algorithm>

namespace deepinfer::grammar {

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) std::swap(lo, hi);
  if (lo > kMaxCodepoint) return;
  hi = std::min(hi, kMaxCodepoint);
  ranges_.emplace_back(lo, hi);
  normalize();
}

void CodepointSet::add(const CodepointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodepointSet CodepointSet::negated() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.ranges_.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.ranges_.emplace_back(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::intersected(const CodepointSet& other) const {
  CodepointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.emplace_back(lo, hi);
    if (ranges_[i].second < other.ranges_[j].second) ++i; else ++j;
  }
  return out;
}

bool CodepointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(cp, kMaxCodepoint + 1));
  if (it == ranges_.begin()) return false;
  --it;
  return cp >= it->first && cp <= it->second;
}

uint64_t CodepointSet::size() const {
  uint64_t n = 0;
  for (const auto& [lo, hi] : ranges_) n += uint64_t{hi} - lo + 1;
  return n;
}

CodepointSet CodepointSet::digit() { return range('0', '9'); }

CodepointSet CodepointSet::word() {
  CodepointSet s = range('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}

CodepointSet CodepointSet::space() {
  // ECMAScript WhiteSpace + LineTerminator.
  CodepointSet s = range(0x09, 0x0D);
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
    s.add(cp, cp);
  }
  s.add(0x2000, 0x200A);
  return s;
}

CodepointSet CodepointSet::dot() {
  CodepointSet s;
  for (uint32_t cp : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) s.add(cp, cp);
  return s.negated();
}

namespace {

int encoded_length(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

void encode(uint32_t cp, uint8_t* out) {
  switch (encoded_length(cp)) {
    case 1: out[0] = static_cast<uint8_t>(cp); break;
    case 2:
      out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    case 3:
      out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
      out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
      out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  }
}

void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  // Remove the surrogate block.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split(0xE000, hi, out);
    return;
  }
  // Split at encoded-length boundaries.
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split(lo, boundary, out);
      split(boundary + 1, hi, out);
      return;
    }
  }
  const int n = encoded_length(lo);
  // Split so that every continuation-byte position spans a full or a single-prefix range.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  Utf8Sequence seq;
  seq.n = n;
  encode(lo, seq.lo);
  encode(hi, seq.hi);
  out.push_back(seq);
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  split(lo, std::min(hi, kMaxCodepoint), out);
  return out;
}

void append_utf8(uint32_t cp, std::string& out) {
  uint8_t buf[4];
  encode(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), encoded_length(cp));
}

bool decode_utf8(const std::string& text, size_t& pos, uint32_t& cp) {
  if (pos >= text.size()) return false;
  const auto b0 = static_cast<uint8_t>(text[pos]);
  int n;
  uint32_t v;
  uint32_t min_value;
  if (b0 < 0x80) { cp = b0; ++pos; return true; }
  if ((b0 & 0xE0) == 0xC0) { n = 2; v = b0 & 0x1F; min_value = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { n = 3; v = b0 & 0x0F; min_value = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { n = 4; v = b0 & 0x07; min_value = 0x10000; }
  else return false;
  if (pos + n > text.size()) return false;
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min_value || v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) return false;
  cp = v;
  pos += n;
  return true;
}

}  // namespace deepinfer::grammar

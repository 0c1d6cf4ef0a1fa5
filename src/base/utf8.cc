// UTF-8 helpers (see utf8.h). The table of well-formed sequences is Unicode Table 3-7.
#include "base/utf8.h"

namespace deepinfer::utf8 {
namespace {

struct SequenceScan {
  size_t n_bytes = 0;      // bytes consumed: the whole sequence, or its maximal ill-formed subpart
  bool complete = false;   // a well-formed sequence of n_bytes
  bool truncated = false;  // well-formed so far but the input ended early
};

// Length of the sequence a lead byte announces, or 0 for bytes that cannot start one.
size_t expected_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The second byte's range depends on the lead (excludes overlongs, surrogates, > U+10FFFF).
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

SequenceScan scan_sequence(const uint8_t* p, size_t avail) {
  const size_t len = expected_length(p[0]);
  if (len == 0) return {1, false, false};
  if (len == 1) return {1, true, false};
  for (size_t k = 1; k < len; ++k) {
    if (k >= avail) return {k, false, true};
    const bool ok = (k == 1) ? second_byte_ok(p[0], p[k]) : (p[k] >= 0x80 && p[k] <= 0xBF);
    if (!ok) return {k, false, false};
  }
  return {len, true, false};
}

}  // namespace

size_t incomplete_tail_length(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  // At most one position among the last three can start a truncated sequence (see utf8.h).
  for (size_t j = n > 3 ? n - 3 : 0; j < n; ++j) {
    if (scan_sequence(p + j, n - j).truncated) return n - j;
  }
  return 0;
}

void append_utf8_lossy(std::string& out, std::string_view bytes, bool keep_incomplete_tail) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  size_t run_begin = 0;  // start of the current run of well-formed bytes, copied in one append
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const SequenceScan s = scan_sequence(p + i, n - i);
    if (s.complete) {
      i += s.n_bytes;
      continue;
    }
    out.append(bytes.data() + run_begin, i - run_begin);
    if (s.truncated && keep_incomplete_tail) {
      out.append(bytes.data() + i, n - i);
      return;
    }
    out.append(kReplacementChar);
    i += s.n_bytes;
    run_begin = i;
  }
  out.append(bytes.data() + run_begin, n - run_begin);
}

bool is_valid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    const SequenceScan s = scan_sequence(p + i, bytes.size() - i);
    if (!s.complete) return false;
    i += s.n_bytes;
  }
  return true;
}

bool is_unicode_white_space(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t decode_code_point(std::string_view bytes, size_t pos, uint32_t* cp) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + pos;
  const SequenceScan s = scan_sequence(p, bytes.size() - pos);
  if (!s.complete) return 0;
  static constexpr uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t value = p[0] & kLeadMask[s.n_bytes];
  for (size_t k = 1; k < s.n_bytes; ++k) value = (value << 6) | (p[k] & 0x3F);
  *cp = value;
  return s.n_bytes;
}

void append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace deepinfer::utf8

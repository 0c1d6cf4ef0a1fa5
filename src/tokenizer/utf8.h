// The tokenizer's view of the engine's UTF-8 helpers (base/utf8.h), under its own namespace.
#pragma once

#include "base/utf8.h"

namespace deepinfer::tokenizer {

using utf8::append_code_point;
using utf8::append_utf8_lossy;
using utf8::decode_code_point;
using utf8::incomplete_tail_length;
using utf8::is_unicode_white_space;
using utf8::is_valid_utf8;
using utf8::kReplacementChar;

}  // namespace deepinfer::tokenizer

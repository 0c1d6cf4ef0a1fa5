// libFuzzer target over the safetensors header parser: any bytes, any claimed file size, must give
// a header or an error naming the problem — never a crash, a hang, an overflow or an out-of-bounds
// read (run under ASan/UBSan). Built by tests/fuzz/run_fuzz.sh (CI) or the `fuzz` preset.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loader/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The claimed file size comes from the last input byte so that truncated files (claimed <
  // header) and data sections longer than the input are both explored.
  uint64_t file_size = size;
  if (size > 0) {
    const uint8_t k = data[size - 1];
    file_size = k < 64 ? size - k % (size + 1) : size + static_cast<uint64_t>(k) * 4099u;
  }
  auto header = deepinfer::loader::parse_safetensors_header(data, size, file_size, "fuzz");
  if (header.is_ok()) {
    // Touch what a loader reads so that inconsistent results show up under the sanitizers.
    size_t n = 0;
    for (const auto& t : header->tensors) n += t.name.size() + t.shape.size();
    if (n == static_cast<size_t>(-1)) return 1;
  } else if (header.status().message().empty()) {
    __builtin_trap();  // errors must say what is wrong
  }
  return 0;
}

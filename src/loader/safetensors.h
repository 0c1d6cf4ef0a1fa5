// safetensors container: header parsing with full consistency checks, a memory-mapped reader and
// a writer that emits the layout PyTorch/HF writers produce (u64 header length, JSON header padded
// with spaces to 8 bytes, `__metadata__` {"format": "pt"}, tensors back to back).
// Every error names the file and, where there is one, the tensor. Nothing here interprets
// quantized formats; see weight_binding.h for FP8/FP4.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/file.h"
#include "base/status.h"
#include "tensor/dtype.h"

namespace deepinfer::loader {

struct TensorInfo {
  std::string name;
  tensor::DType dtype = tensor::DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the first byte after the header
  uint64_t end = 0;
  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // sorted by begin offset
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length
};

// Parses and validates a header from the first bytes of a file of `file_size` bytes.
// `label` (usually the path) prefixes every error. Never reads past `size`.
// Checks: header length within the file and below 256 MiB; UTF-8 JSON object; known dtypes;
// non-negative shapes without overflow; offsets inside the data section; end - begin equal to
// numel * element size; no overlapping tensors; no duplicate names; string metadata.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t size,
                                                   uint64_t file_size, const std::string& label);

// A memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(std::string_view name) const;
  // Pointer to the tensor's bytes inside the mapping (valid while this object lives).
  const uint8_t* data(const TensorInfo& info) const {
    return file_.data() + header_.data_start + info.begin;
  }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// Collects tensors and writes one safetensors file.
class SafetensorsWriter {
 public:
  // Produces a tensor's bytes when the file is written, so shards of any size stream to disk
  // without holding all their tensors in memory.
  using Producer = std::function<std::string()>;

  void add(std::string name, tensor::DType dtype, std::vector<int64_t> shape, std::string bytes);
  void add_lazy(std::string name, tensor::DType dtype, std::vector<int64_t> shape, Producer produce);
  size_t n_tensors() const { return entries_.size(); }
  // Sum of tensor data bytes (dtype size x numel).
  uint64_t data_bytes() const;
  std::vector<std::string> names() const;
  // Writes atomically (tmp + rename). Fails on a byte count that does not match dtype x shape.
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    tensor::DType dtype;
    std::vector<int64_t> shape;
    Producer produce;
    uint64_t nbytes() const;
  };
  std::vector<const Entry*> sorted() const;
  std::string header_text() const;
  std::vector<Entry> entries_;
};

}  // namespace deepinfer::loader

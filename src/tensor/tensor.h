// TensorView: a non-owning, strided view of up to 5 dimensions (element strides), cheap to copy.
// Buffer: owned, 64-byte-aligned host memory (CPU backend); device memory is owned by the CUDA
// backend's allocator and only ever seen here as a view with Device::kCuda.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "base/check.h"
#include "tensor/dtype.h"

namespace deepinfer::tensor {

inline constexpr int kMaxRank = 5;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};
  std::array<int64_t, kMaxRank> stride{};  // in elements

  // A contiguous (row-major) view.
  static TensorView contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                               Device device = Device::kCpu);
  static TensorView contiguous(void* data, DType dtype, const int64_t* shape, int rank,
                               Device device = Device::kCpu);

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const {
    DI_DCHECK(i >= 0 && i < rank, "dim {} of rank {}", i, rank);
    return shape[i];
  }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Pointer to element (i0, i1, ...) given as leading indices; trailing ones are 0.
  void* at(std::initializer_list<int64_t> index) const;
  // View of rows [begin, end) of dimension 0.
  TensorView slice0(int64_t begin, int64_t end) const;
  // Same data, new contiguous shape (requires a contiguous view and equal numel).
  TensorView reshape(std::initializer_list<int64_t> new_shape) const;

  // "[2, 3] F32" for messages.
  std::string shape_string() const;
};

// Owned aligned host memory.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t nbytes);
  size_t size() const { return size_; }
  void* data() const { return data_.get(); }
  // A contiguous view of the whole buffer (numel(shape) * dtype size must fit).
  TensorView view(DType dtype, std::initializer_list<int64_t> shape) const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

}  // namespace deepinfer::tensor

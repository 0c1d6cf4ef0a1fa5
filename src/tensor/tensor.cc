#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace deepinfer::tensor {

TensorView TensorView::contiguous(void* data, DType dtype, const int64_t* shape, int rank,
                                  Device device) {
  DI_CHECK(rank >= 0 && rank <= kMaxRank, "rank {}", rank);
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.rank = rank;
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.stride[i] = s;
    s *= shape[i];
  }
  return v;
}

TensorView TensorView::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                                  Device device) {
  return contiguous(data, dtype, shape.begin(), static_cast<int>(shape.size()), device);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != s) return false;
    s *= shape[i];
  }
  return true;
}

void* TensorView::at(std::initializer_list<int64_t> index) const {
  DI_DCHECK(static_cast<int>(index.size()) <= rank, "index rank");
  int64_t off = 0;
  int i = 0;
  for (int64_t x : index) {
    DI_DCHECK(x >= 0 && x < shape[i], "index {} out of range {} in dim {}", x, shape[i], i);
    off += x * stride[i++];
  }
  return static_cast<uint8_t*>(data) + off * static_cast<int64_t>(dtype_size(dtype));
}

TensorView TensorView::slice0(int64_t begin, int64_t end) const {
  DI_CHECK(rank >= 1 && begin >= 0 && begin <= end && end <= shape[0], "slice [{}, {}) of {}",
           begin, end, shape_string());
  TensorView v = *this;
  v.shape[0] = end - begin;
  v.data = static_cast<uint8_t*>(data) + begin * stride[0] * static_cast<int64_t>(dtype_size(dtype));
  return v;
}

TensorView TensorView::reshape(std::initializer_list<int64_t> new_shape) const {
  DI_CHECK(is_contiguous(), "reshape of a non-contiguous view {}", shape_string());
  TensorView v = contiguous(data, dtype, new_shape.begin(), static_cast<int>(new_shape.size()),
                            device);
  DI_CHECK(v.numel() == numel(), "reshape {} to {} elements", shape_string(), v.numel());
  return v;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "] " + std::string(dtype_name(dtype));
}

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(size_t nbytes) : size_(nbytes) {
  const size_t rounded = (nbytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  DI_CHECK(p != nullptr, "out of host memory allocating {} bytes", nbytes);
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  data_.reset(p);
}

TensorView Buffer::view(DType dtype, std::initializer_list<int64_t> shape) const {
  TensorView v = TensorView::contiguous(data(), dtype, shape);
  DI_CHECK(v.nbytes() <= size_, "view {} larger than buffer of {} bytes", v.shape_string(), size_);
  return v;
}

}  // namespace deepinfer::tensor

// Weight bundles the op interface takes (views only, no ownership): one sublayer's mHC mixing
// parameters, the final HC collapse, a compressor, and one SwiGLU expert. The model-level layout
// (loader/weights.h) is built from these.
#pragma once

#include "tensor/linear_weight.h"
#include "tensor/tensor.h"

namespace deepinfer::tensor {

// mHC mixing parameters of one sublayer (model_v4_flash.md §4.2).
struct HcWeights {
  TensorView fn;     // [(2+hc)*hc, hc*D] F32
  TensorView base;   // [(2+hc)*hc] F32
  TensorView scale;  // [3] F32
};

// Final HC collapse (§4.10).
struct HcHeadWeights {
  TensorView fn;     // [hc, hc*D] F32
  TensorView base;   // [hc] F32
  TensorView scale;  // [1] F32
};

// A compressor (§4.6): attention (dc = head_dim) or indexer (dc = index_head_dim).
struct CompressorWeights {
  TensorView ape;      // [ratio, kappa*dc] F32 (learned per-slot position bias)
  LinearWeight wkv;    // [kappa*dc, D] BF16
  LinearWeight wgate;  // [kappa*dc, D] BF16
  TensorView norm;     // [dc] BF16
};

struct ExpertWeights {
  LinearWeight w1;  // gate [F, D]
  LinearWeight w2;  // down [D, F]
  LinearWeight w3;  // up   [F, D]
};

}  // namespace deepinfer::tensor

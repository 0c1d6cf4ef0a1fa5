// ActType -> C++ element type dispatch for the launch functions (device code side).
#pragma once

#include <cuda_bf16.h>

#include "kernels/launch.h"

namespace deepinfer::kernels {

template <typename F>
void with_act(ActType t, F&& f) {
  if (t == ActType::kF32) {
    f(float{});
  } else {
    f(__nv_bfloat16{});
  }
}

template <typename F>
void with_act2(ActType a, ActType b, F&& f) {
  with_act(a, [&](auto ta) { with_act(b, [&](auto tb) { f(ta, tb); }); });
}

template <typename F>
void with_act3(ActType a, ActType b, ActType c, F&& f) {
  with_act2(a, b, [&](auto ta, auto tb) { with_act(c, [&](auto tc) { f(ta, tb, tc); }); });
}

inline unsigned grid_for(int64_t n, int threads = 256) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace deepinfer::kernels

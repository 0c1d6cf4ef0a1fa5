// RoPE frequency tables of DeepSeek-V4 (model_v4_flash.md §4.4): plain theta for sliding-window
// layers, compress_rope_theta with YaRN (no mscale) for every layer with a compressor. Computed in
// F32 the way the reference (and transformers) do, so angles match to the last bit.
#pragma once

#include <vector>

#include "loader/model_config.h"

namespace deepinfer::model {

// theta_i for i in [0, n_rope/2): base^(-2i/n_rope), YaRN-blended when `yarn` is set.
std::vector<float> rope_inv_freq(double base, int64_t n_rope, const loader::RopeScaling& scaling, bool yarn);

// The table a layer with compression ratio `ratio` uses.
std::vector<float> layer_inv_freq(const loader::ModelConfig& config, int ratio);

}  // namespace deepinfer::model

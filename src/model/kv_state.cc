#include "model/kv_state.h"

#include <limits>

#include "base/check.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

namespace {

CompressorState make_compressor(ops::Ops* ops, int32_t n_slots, int ratio, int64_t dc, int64_t* bytes) {
  const bool overlapped = ratio == 4;
  const int64_t n_state = overlapped ? 2 * ratio : ratio;
  const int64_t width = overlapped ? 2 * dc : dc;
  CompressorState s{ops->alloc_persistent(DType::kF32, {n_slots, n_state, width}),
                    ops->alloc_persistent(DType::kF32, {n_slots, n_state, width})};
  *bytes += 2 * n_state * width * 4;
  return s;
}

// A view of one slot's rows of a [n_slots, ...] tensor.
TensorView slot_view(const TensorView& t, int32_t slot) { return t.slice0(slot, slot + 1); }

}  // namespace

KvState::KvState(const loader::ModelConfig& c, const KvStateOptions& options, ops::Ops* ops)
    : config_(c), options_(options), ops_(ops) {
  DI_CHECK(options.block_tokens % c.max_ratio() == 0, "block_tokens {} must be a multiple of ratio {}",
           options.block_tokens, c.max_ratio());
  const int64_t n_layers = c.num_hidden_layers + c.n_mtp_layers;
  const int64_t kv_size = static_cast<int64_t>(tensor::dtype_size(options.kv_dtype));
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerState s;
    s.ratio = c.ratio(l);
    s.window = ops->alloc_persistent(options.kv_dtype, {options.n_slots, c.sliding_window, c.head_dim});
    bytes_per_slot_ += c.sliding_window * c.head_dim * kv_size;
    if (s.ratio > 0) {
      s.comp = make_compressor(ops, options.n_slots, s.ratio, c.head_dim, &bytes_per_slot_);
      const int64_t rows = static_cast<int64_t>(options.n_blocks) * options.block_tokens / s.ratio;
      s.comp_rows = ops->alloc_persistent(options.kv_dtype, {rows, c.head_dim});
      bytes_per_block_ += options.block_tokens / s.ratio * c.head_dim * kv_size;
    }
    if (s.ratio == 4) {
      s.idx_comp = make_compressor(ops, options.n_slots, s.ratio, c.index_head_dim, &bytes_per_slot_);
      const int64_t rows = static_cast<int64_t>(options.n_blocks) * options.block_tokens / s.ratio;
      s.idx_keys = ops->alloc_persistent(options.kv_dtype, {rows, c.index_head_dim});
      bytes_per_block_ += options.block_tokens / s.ratio * c.index_head_dim * kv_size;
    }
    layers_.push_back(s);
  }
}

void KvState::reset_slot(int32_t slot) {
  DI_CHECK(slot >= 0 && slot < options_.n_slots, "slot {} out of range", slot);
  for (LayerState& s : layers_) {
    for (CompressorState* cs : {&s.comp, &s.idx_comp}) {
      if (cs->kv.empty()) continue;
      ops_->fill(slot_view(cs->kv, slot), 0.0f);
      ops_->fill(slot_view(cs->score, slot), -std::numeric_limits<float>::infinity());
    }
  }
}

void KvState::copy_slot(int32_t src, int32_t dst) {
  for (LayerState& s : layers_) {
    ops_->copy(slot_view(s.window, src), slot_view(s.window, dst));
    for (CompressorState* cs : {&s.comp, &s.idx_comp}) {
      if (cs->kv.empty()) continue;
      ops_->copy(slot_view(cs->kv, src), slot_view(cs->kv, dst));
      ops_->copy(slot_view(cs->score, src), slot_view(cs->score, dst));
    }
  }
}

}  // namespace deepinfer::model

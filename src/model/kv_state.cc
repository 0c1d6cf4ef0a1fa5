#include "model/kv_state.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

namespace {

// V4: overlapped two-series state for ratio 4. V4.1: one non-overlapping group of `ratio` tokens.
CompressorState make_compressor(ops::Ops* ops, int32_t n_slots, int ratio, int64_t dc, bool overlapped, int32_t spare,
                                int64_t* bytes) {
  const int64_t n_state = (overlapped ? 2 * ratio : ratio) + spare;
  const int64_t width = overlapped ? 2 * dc : dc;
  CompressorState s{ops->alloc_persistent(DType::kF32, {n_slots, n_state, width}),
                    ops->alloc_persistent(DType::kF32, {n_slots, n_state, width})};
  *bytes += 2 * n_state * width * 4;
  return s;
}

// A view of one slot's rows of a [n_slots, ...] tensor.
TensorView slot_view(const TensorView& t, int32_t slot) { return t.slice0(slot, slot + 1); }

// Which layers own history pools, and of what width (0: none).
struct PoolWidths {
  int64_t rows = 0, keys = 0;
};
PoolWidths pool_widths(const loader::ModelConfig& c, int64_t layer) {
  const int ratio = c.ratio(layer);
  if (ratio == 0 || layer >= c.num_hidden_layers) return {};
  if (c.is_v41()) return c.is_kv_source(layer) ? PoolWidths{c.head_dim, c.index_head_dim} : PoolWidths{};
  return {c.head_dim, ratio == 4 ? c.index_head_dim : 0};
}

}  // namespace

int64_t KvState::history_bytes_per_block(const loader::ModelConfig& c, int32_t block_tokens, DType kv_dtype) {
  const int64_t kv_size = static_cast<int64_t>(tensor::dtype_size(kv_dtype));
  int64_t bytes = 0;
  for (int64_t l = 0; l < c.num_hidden_layers + c.n_mtp_layers; ++l) {
    const PoolWidths w = pool_widths(c, l);
    if (w.rows > 0) bytes += block_tokens / c.ratio(l) * (w.rows + w.keys) * kv_size;
  }
  return bytes;
}

KvState::KvState(const loader::ModelConfig& c, const KvStateOptions& options, ops::Ops* ops)
    : config_(c), options_(options), ops_(ops) {
  DI_CHECK(options.block_tokens % c.max_ratio() == 0, "block_tokens {} must be a multiple of ratio {}",
           options.block_tokens, c.max_ratio());
  const int64_t n_layers = c.num_hidden_layers + c.n_mtp_layers;
  const int64_t kv_size = static_cast<int64_t>(tensor::dtype_size(options.kv_dtype));
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerState s;
    s.ratio = c.ratio(l);
    DI_CHECK(options.spare_positions >= 0, "spare_positions {} must be >= 0", options.spare_positions);
    const int64_t ring = c.sliding_window + options.spare_positions;
    s.window = ops->alloc_persistent(options.kv_dtype, {options.n_slots, ring, c.head_dim});
    bytes_per_slot_ += ring * c.head_dim * kv_size;
    const bool streaming = c.is_v41() ? (c.is_kv_source(l) && s.ratio > 1) : s.ratio > 0;
    if (streaming) {
      s.comp = make_compressor(ops, options.n_slots, s.ratio, c.head_dim, !c.is_v41() && s.ratio == 4,
                               options.spare_positions, &bytes_per_slot_);
    }
    if (!c.is_v41() && s.ratio == 4) {
      s.idx_comp = make_compressor(ops, options.n_slots, s.ratio, c.index_head_dim, true, options.spare_positions,
                                   &bytes_per_slot_);
    }
    const PoolWidths w = pool_widths(c, l);
    if (w.rows > 0) {
      const int64_t rows = static_cast<int64_t>(options.n_blocks) * options.block_tokens / s.ratio;
      s.comp_rows = ops->alloc_persistent(options.kv_dtype, {rows, w.rows});
      if (w.keys > 0) s.idx_keys = ops->alloc_persistent(options.kv_dtype, {rows, w.keys});
    }
    layers_.push_back(s);
  }
  bytes_per_block_ = history_bytes_per_block(c, options.block_tokens, options.kv_dtype);
  decoder_rows_.assign(static_cast<size_t>(options.n_slots), DecoderRows{});
  if (c.is_v41() && !c.engram_layer_ids.empty()) {
    n_engram_back_ = static_cast<int32_t>(c.engram_max_ngram_size - 1);
    engram_ring_size_ = n_engram_back_ + options.spare_positions;
    engram_ring_.assign(static_cast<size_t>(options.n_slots) * engram_ring_size_ * 2, -1);
    bytes_per_slot_ += engram_ring_size_ * 2 * 4;
  }
}

void KvState::release() {
  for (LayerState& s : layers_) {
    for (const TensorView* t : {&s.window, &s.comp.kv, &s.comp.score, &s.idx_comp.kv, &s.idx_comp.score, &s.comp_rows,
                                &s.idx_keys}) {
      if (!t->empty()) ops_->free_persistent(*t);
    }
  }
  layers_.clear();
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
  const size_t n = static_cast<size_t>(engram_ring_size_) * 2;
  std::fill_n(engram_ring_.begin() + static_cast<std::ptrdiff_t>(slot * n), n, -1);
  decoder_rows_[static_cast<size_t>(slot)] = DecoderRows{};
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
  const size_t n = static_cast<size_t>(engram_ring_size_) * 2;
  std::copy_n(engram_ring_.begin() + static_cast<std::ptrdiff_t>(src * n), n,
              engram_ring_.begin() + static_cast<std::ptrdiff_t>(dst * n));
  decoder_rows_[static_cast<size_t>(dst)] = decoder_rows_[static_cast<size_t>(src)];
}

void KvState::forget_from(int32_t slot, int32_t end) {
  DI_CHECK(slot >= 0 && slot < options_.n_slots && end >= 0, "forget_from: slot {} end {}", slot, end);
  DecoderRows& rows = decoder_rows_[static_cast<size_t>(slot)];
  rows.next = std::min(rows.next, end);
  rows.floor = std::min(rows.floor, rows.next);
}

int32_t KvState::engram_id(int32_t slot, int32_t pos) const {
  if (n_engram_back_ == 0 || pos < 0) return -1;
  const size_t at = (static_cast<size_t>(slot) * engram_ring_size_ + static_cast<size_t>(pos % engram_ring_size_)) * 2;
  return engram_ring_[at] == pos ? engram_ring_[at + 1] : -1;
}

void KvState::record_engram_id(int32_t slot, int32_t pos, int32_t id) {
  if (n_engram_back_ == 0) return;
  const size_t at = (static_cast<size_t>(slot) * engram_ring_size_ + static_cast<size_t>(pos % engram_ring_size_)) * 2;
  engram_ring_[at] = pos;
  engram_ring_[at + 1] = id;
}

}  // namespace deepinfer::model

// ModelV41 Engram (model_v41_flash.md §4): n-gram hashing over the compressed vocabulary on the
// host (look-back from the batch, the slot's history or the batch's explicit look-back; unknown
// positions block like sequence starts), row gather from the host-resident FP8 table, then the
// device-side wkv projection and per-stream gate into the residual streams.
#include <algorithm>

#include "model/v41/model_v41.h"
#include "model/v41/step_v41.h"

namespace deepinfer::model {

using tensor::DType;
using tensor::TensorView;

// Fills step.engram_rows: for every row and Engram layer the n_cols table rows of the 2..N-grams
// ending at that position, and records the batch's compressed ids in the slots' histories.
void ModelV41::hash_engram(Step& step, KvState& state) {
  const loader::EngramLayout& e = engram_layout_;
  if (e.n_layers == 0) return;
  const ForwardBatch& b = *step.host;
  const int32_t n_back = state.engram_lookback();
  const int64_t N = e.max_ngram, T = step.full.n();
  step.engram_rows.assign(static_cast<size_t>(e.n_layers), std::vector<int64_t>(static_cast<size_t>(T * e.n_cols())));
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const ops::SeqSpan& seq = b.seqs[s];
    // Compressed ids of positions start - n_back .. end - 1 (-1: unknown, blocks like p < 0).
    std::vector<int32_t> ids(static_cast<size_t>(n_back + seq.n_tokens), -1);
    for (int32_t k = 0; k < n_back; ++k) {
      const int32_t pos = seq.start_pos - n_back + k;
      int32_t id = b.engram_lookback.empty() ? -1 : b.engram_lookback[s * n_back + k];
      id = id >= 0 && id < config_.vocab_size ? engram_map_.token_map[static_cast<size_t>(id)]
           : id == kEngramLookbackImage       ? -1  // DEAD
                                              : state.engram_id(seq.slot, pos);
      ids[static_cast<size_t>(k)] = pos < 0 ? -1 : id;
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      ids[static_cast<size_t>(n_back + i)] = engram_map_.token_map[static_cast<size_t>(b.token_ids[seq.token_begin + i])];
    }
    // Image-span positions are DEAD (§4.1): blocked like positions before the sequence, and kept
    // so in the slot's history (recorded as -1) for the n-grams of later steps.
    for (auto it = std::lower_bound(b.image_rows.begin(), b.image_rows.end(), seq.token_begin);
         it != b.image_rows.end() && *it < seq.token_begin + seq.n_tokens; ++it) {
      ids[static_cast<size_t>(n_back + *it - seq.token_begin)] = -1;
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int64_t t = seq.token_begin + i;
      for (int64_t l = 0; l < e.n_layers; ++l) {
        const std::vector<int64_t>& mult = e.multipliers[static_cast<size_t>(l)];
        bool blocked = false;
        int64_t rolling = 0;
        for (int64_t shift = 0; shift < N; ++shift) {
          const int32_t src = ids[static_cast<size_t>(n_back + i - shift)];
          blocked = blocked || src < 0;  // sticky: once blocked, every older slot is the pad id
          const int64_t tok = blocked ? engram_map_.pad_id : src;
          rolling = shift == 0 ? tok * mult[0] : (rolling ^ (tok * mult[static_cast<size_t>(shift)]));
          if (shift == 0) continue;
          for (int64_t h = 0; h < e.n_heads; ++h) {
            const size_t col = static_cast<size_t>((shift - 1) * e.n_heads + h);
            step.engram_rows[l][t * e.n_cols() + col] =
                rolling % e.primes[l][col] + e.offsets[l][col];
          }
        }
      }
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      state.record_engram_id(seq.slot, seq.start_pos + i, ids[static_cast<size_t>(n_back + i)]);
    }
  }
}

// Gathers the rows on the host (the table never has to live on the device), projects them with
// wkv into hc keys + one value, and gates the value into each stream.
TensorView ModelV41::engram(const loader::EngramWeights& w, int64_t layer, Step& step, const TensorView& x) {
  const int64_t T = x.shape[0], hd = config_.engram_head_dim, D = config_.hidden_size, hc = config_.hc_mult;
  const int idx = config_.engram_index(layer);
  const std::vector<int64_t>& rows = step.engram_rows[static_cast<size_t>(idx)];
  const int64_t n_cols = engram_layout_.n_cols();
  std::vector<float> host(static_cast<size_t>(T * n_cols * hd));
  for (int64_t i = 0; i < T * n_cols; ++i) w.table.dequantize_row(rows[static_cast<size_t>(i)], &host[i * hd]);
  TensorView gathered = ops_->upload(host.data(), DType::kF32, {T, n_cols * hd});
  TensorView kv = alloc_act({T, (hc + 1) * D});
  ops_->linear(gathered, w.wkv, kv, fp8_act());
  // Image-span rows get gate 0 (§4.2): live [T] I32, 0 there. Engram layers precede the CED
  // decoder (validated), so x holds the full rows.
  TensorView live;
  if (!step.full.image_rows.empty()) {
    std::vector<int32_t> h(static_cast<size_t>(T), 1);
    for (int32_t r : step.full.image_rows) h[static_cast<size_t>(r)] = 0;
    live = ops_->upload(h.data(), DType::kI32, {T});
  }
  TensorView out = alloc_act({T, hc, D});
  ops_->engram_gate(x, kv, w.q_weight, w.k_weight, live, static_cast<float>(config_.rms_norm_eps), out);
  return out;
}

}  // namespace deepinfer::model

// A CUDA op-test harness with a batch description: sequences of token rows (SeqSpan), their
// positions and history block tables, as a host BatchView (the CPU reference's) and a device one.
#pragma once

#include <utility>
#include <vector>

#include "op_test_harness.h"
#include "ops/batch.h"

namespace deepinfer::testing {

class BatchHarness : public OpHarness {
 protected:
  // Sequence i owns blocks [i * max_blocks, (i + 1) * max_blocks) of 128 positions, or the
  // blocks of sequence table_of[i] when given (the same sequence in another batch).
  void set_batch(std::vector<ops::SeqSpan> seqs, int32_t max_blocks, std::vector<int32_t> table_of = {}) {
    seqs_ = std::move(seqs);
    positions_.clear();
    token_seq_.clear();
    ids_.clear();
    tables_.clear();
    for (const auto& s : seqs_)
      for (int32_t i = 0; i < s.n_tokens; ++i) {
        positions_.push_back(s.start_pos + i);
        token_seq_.push_back(static_cast<int32_t>(&s - seqs_.data()));
        ids_.push_back(static_cast<int32_t>(positions_.size() * 7 % 100));
      }
    max_blocks_ = max_blocks;
    for (size_t i = 0; i < seqs_.size(); ++i)
      for (int32_t k = 0; k < max_blocks; ++k)
        tables_.push_back((table_of.empty() ? static_cast<int32_t>(i) : table_of[i]) * max_blocks + k);
    host_ = view(false);
    dev_ = view(true);
  }
  ops::BatchView view(bool device) {
    ops::BatchView b;
    b.n_tokens = static_cast<int64_t>(positions_.size());
    b.n_seqs = static_cast<int64_t>(seqs_.size());
    b.block_tokens = 128;
    b.max_blocks = max_blocks_;
    auto v = [&](std::vector<int32_t>& h, std::initializer_list<int64_t> shape) {
      TensorView hv = TensorView::contiguous(h.data(), DType::kI32, shape);
      if (!device) return hv;
      TensorView d = gpu_->alloc_persistent(DType::kI32, shape);
      gpu_->copy(hv, d);
      return d;
    };
    b.token_ids = v(ids_, {b.n_tokens});
    b.positions = v(positions_, {b.n_tokens});
    b.token_seq = v(token_seq_, {b.n_tokens});
    seq_words_.assign(reinterpret_cast<int32_t*>(seqs_.data()), reinterpret_cast<int32_t*>(seqs_.data()) + 6 * seqs_.size());
    b.seqs = v(seq_words_, {b.n_seqs, 6});
    b.block_tables = v(tables_, {b.n_seqs, max_blocks_});
    b.h_token_ids = ids_.data();
    b.h_positions = positions_.data();
    b.h_token_seq = token_seq_.data();
    b.h_seqs = seqs_.data();
    b.h_block_tables = tables_.data();
    return b;
  }
  std::vector<ops::SeqSpan> seqs_;
  std::vector<int32_t> positions_, token_seq_, ids_, tables_, seq_words_;
  int32_t max_blocks_ = 0;
  ops::BatchView host_, dev_;
};

}  // namespace deepinfer::testing

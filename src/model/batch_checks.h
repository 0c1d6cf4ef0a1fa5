// The ForwardBatch layout every model's forward relies on, checked once for V4 and V4.1 alike:
// contiguous rows per sequence, slots in range, consecutive positions below the model's limit,
// window floors, token ids inside the vocabulary, logit rows, and — when the model reads history
// blocks — each sequence's block table. Model-specific fields are checked by the models.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "model/forward_batch.h"
#include "model/kv_state.h"

namespace deepinfer::model {

// Errors are INVALID_ARGUMENT / OUT_OF_RANGE messages prefixed "forward:" naming the sequence, row
// or field at fault.
Status check_batch_layout(const ForwardBatch& b, const KvStateOptions& state, int64_t vocab_size,
                          int64_t max_positions, bool needs_blocks);

}  // namespace deepinfer::model

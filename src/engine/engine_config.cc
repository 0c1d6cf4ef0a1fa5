// make_engine_config: pool sizes, lengths and the replay/snapshot policies from EngineOptions and
// the model (see engine_config.h). The replay window numbers follow docs/kv-cache.md: bounded =
// one sliding window (+ the rewind tokens DEEPINFER_YOCO_PREFILL_KEEP_TOKENS adds for V4.1),
// exact = the receptive field of the stacked windows.
#include "engine/engine_config.h"

#include <algorithm>

#include "base/status.h"

namespace deepinfer::engine {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

kv::ReplayConfig make_replay(const EngineOptions& options, const loader::ModelConfig& c) {
  kv::ReplayConfig r;
  r.mode = options.replay_mode == "exact" ? kv::ReplayMode::kExact : kv::ReplayMode::kBounded;
  r.window = static_cast<int32_t>(c.sliding_window);
  // forward() runs the main stack only; MTP layers join the longest path once drafting runs.
  r.n_layers = static_cast<int32_t>(c.num_hidden_layers + (options.mtp_varlen ? c.n_mtp_layers : 0));
  const bool has_overlapped = std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 4) > 0;
  r.max_overlap = has_overlapped ? 4 : 0;
  if (c.family == loader::ModelFamily::kV41) {
    // The retained suffix covers the window plus the rewind depth (140 = 128 + 12); ratio-2
    // compressors need R at a group boundary (TRT-LLM re-includes an odd cached token).
    r.n_extra_tokens = std::max(0, options.yoco_keep_tokens - r.window);
    r.align_tokens = 2;
  }
  return r;
}

}  // namespace

int64_t kv_bytes_per_block(const loader::ModelConfig& c, int32_t block_tokens, tensor::DType kv_dtype) {
  // KvState's own layout (V4: every compressed layer; V4.1: only the KV sources own pools).
  return std::max<int64_t>(model::KvState::history_bytes_per_block(c, block_tokens, kv_dtype), 1);
}

Result<EngineConfig> make_engine_config(const EngineOptions& options, const loader::ModelConfig& c,
                                        tensor::DType kv_dtype, uint64_t model_fingerprint) {
  DI_RETURN_IF_ERROR(options.validate());
  if (options.block_tokens % c.max_ratio() != 0) {
    return invalid_argument("block_tokens = {} must be a multiple of the model's largest compression ratio {}",
                            options.block_tokens, c.max_ratio());
  }
  if (options.max_model_len > c.max_position_embeddings) {
    return invalid_argument("max_model_len = {} exceeds the model's max_position_embeddings {}",
                            options.max_model_len, c.max_position_embeddings);
  }
  EngineConfig ec;
  int64_t n_blocks = options.kv_blocks;
  if (n_blocks == 0) {
    const int64_t budget = options.kv_cache_bytes > 0 ? options.kv_cache_bytes : kDefaultKvCacheBytes;
    n_blocks = budget / kv_bytes_per_block(c, options.block_tokens, kv_dtype);
    if (options.max_model_len > 0) {
      n_blocks = std::min<int64_t>(n_blocks, int64_t{options.max_num_seqs} *
                                                 ceil_div(options.max_model_len, options.block_tokens));
    }
    if (n_blocks < 1) {
      return invalid_argument("kv_cache_bytes = {} holds no history block ({} bytes each)", budget,
                              kv_bytes_per_block(c, options.block_tokens, kv_dtype));
    }
  }
  n_blocks = std::min<int64_t>(n_blocks, INT32_MAX / options.block_tokens);
  const int64_t pool_tokens = n_blocks * options.block_tokens;
  const int64_t model_limit = std::min<int64_t>(c.max_position_embeddings, pool_tokens);
  ec.max_model_len = static_cast<int32_t>(options.max_model_len > 0 ? std::min<int64_t>(options.max_model_len, model_limit)
                                                                   : model_limit);
  if (ec.max_model_len < 2) {
    return invalid_argument("max_model_len = {} leaves no room for a prompt and a generated token "
                            "(kv_blocks = {} of {} tokens)", ec.max_model_len, n_blocks, options.block_tokens);
  }

  ec.sched.max_num_seqs = options.max_num_seqs;
  ec.sched.max_num_batched_tokens = options.max_num_batched_tokens;
  ec.sched.max_model_len = ec.max_model_len;
  ec.sched.max_prefill_chunk = options.max_prefill_chunk;
  // Speculative decoding: the checkpoint's draft module proposes, the step verifies.
  if (options.nextn_decode > 0 || options.mtp_varlen) {
    if (c.n_mtp_layers == 0) {
      return invalid_argument("nextn_decode / mtp_varlen: the checkpoint has no draft module "
                              "(num_nextn_predict_layers = 0)");
    }
    const bool dspark = c.dspark_block_size > 0;
    ec.drafter = dspark ? Drafter::kDspark : Drafter::kMtp;
    const int32_t block = static_cast<int32_t>(c.dspark_block_size);
    // Upstream DeepInfer's default max draft length is 5, V4.1's DSpark block.
    ec.sched.max_draft_tokens = options.nextn_decode > 0 ? options.nextn_decode : (dspark ? block : 5);
    if (dspark && ec.sched.max_draft_tokens > block) {
      return invalid_argument("nextn_decode = {} exceeds the DSpark block of {} drafts", options.nextn_decode, block);
    }
  }
  // V4.1 Engram hashes the n-gram ending at each position: a replay from a cold slot needs the
  // N - 1 ids before it.
  if (c.is_v41() && !c.engram_layer_ids.empty()) {
    ec.sched.n_lookback_tokens = static_cast<int32_t>(c.engram_max_ngram_size - 1);
  }

  ec.kv.block_tokens = options.block_tokens;
  ec.kv.n_blocks = static_cast<int32_t>(n_blocks);
  ec.kv.n_state_slots = options.max_num_seqs;
  ec.kv.n_snapshot_slots = options.enable_prefix_caching ? options.n_snapshot_slots : 0;
  ec.kv.snapshot.interval_tokens = options.snapshot_interval_tokens;
  ec.kv.compress_ratios.assign(c.compress_ratios.begin(), c.compress_ratios.end());
  ec.kv.enable_prefix_caching = options.enable_prefix_caching;
  ec.kv.hash_seed = model_fingerprint;
  ec.kv.replay = make_replay(options, c);
  DI_RETURN_IF_ERROR(kv::validate_kv_config(ec.kv));

  ec.n_state_slots = ec.kv.n_state_slots;
  ec.state.n_slots = ec.kv.n_state_slots + ec.kv.n_snapshot_slots;
  // Rows of rejected drafts: at most max_draft_tokens past a sequence's end (the MTP's chained
  // rows one fewer), so as many spare ring positions leave every row the model reads intact.
  ec.state.spare_positions = ec.sched.max_draft_tokens;
  ec.state.n_blocks = ec.kv.n_blocks;
  ec.state.block_tokens = options.block_tokens;
  ec.state.kv_dtype = kv_dtype;
  return ec;
}

}  // namespace deepinfer::engine

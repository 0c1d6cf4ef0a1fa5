// BatchPlan: what the scheduler tells the runner for one engine step, as plain data (vLLM's
// SchedulerOutput, nano-vllm's five arrays). The runner turns it into model::ForwardBatch.
// Invariants: each sequence appears at most once; decode sequences come first, then prefill
// chunks; Σ n_tokens_scheduled ≤ max_num_batched_tokens; positions of a sequence are
// [first_position, first_position + n_tokens_scheduled) and its block table covers them.
// SeqOutput/SeqEvent are the two ends of update(): engine results in, emitted tokens out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/types.h"
#include "sched/request.h"

namespace deepinfer::sched {

// How the runner prepares the state slot before the forward.
enum class StateInit : uint8_t {
  kKeep,             // continuing sequence: the slot holds its state
  kReset,            // (re)admitted without snapshot: clear rings, compressor scores to −∞
  kRestoreSnapshot,  // copy snapshot_restore → state_slot, then run from first_position
};
const char* state_init_name(StateInit init);

struct SeqPlan {
  SeqId seq_id = 0;
  kv::SlotId state_slot = kv::kNoId;
  StateInit state_init = StateInit::kKeep;
  kv::SnapshotId snapshot_restore = kv::kNoId;  // with kRestoreSnapshot: copy before the forward
  kv::SnapshotId snapshot_take = kv::kNoId;     // copy state_slot → this slot after the forward
  int32_t first_position = 0;      // == tokens computed so far
  int32_t n_tokens_scheduled = 0;  // including the n_draft_tokens at the end
  int32_t n_draft_tokens = 0;      // speculative tokens to verify (decode only)
  // H: history rows of compressor groups that complete below H are cached and shared: read them,
  // never write them (positions in [first_position, H) are a replay of the cached prefix).
  int32_t n_history_cached = 0;
  // Window rings never held positions below this (cold start: 0; bounded replay: R). The
  // model masks window positions < window_floor.
  int32_t window_floor = 0;
  // Prompt length of the sequence (V4.1 compact prefill keeps the decoder on the last
  // yoco_keep_tokens prompt positions; model::ForwardBatch::n_prompt).
  int32_t n_prompt = 0;
  // Last prompt chunk or decode: sample after this step. With drafts, logits are needed for the
  // last n_draft_tokens + 1 positions (verification), otherwise for the last position only.
  bool needs_logits = false;
  // Prompt logprobs (RequestParams::prompt_logits): the first n rows of the step also need logits —
  // positions first_position .. + n - 1, each followed by a prompt token — besides needs_logits' rows.
  int32_t n_prompt_logit_rows = 0;
  std::vector<TokenId> token_ids;  // n_tokens_scheduled ids: known tokens, then the drafts
  // Planned ahead (Scheduler::schedule_ahead): token_ids[0] is a placeholder for the token the plan
  // in flight samples for this sequence, which the runner reads where the device sampled it.
  bool token_from_device = false;
  // With a cold state slot (kReset) and SchedulerConfig::n_lookback_tokens > 0: the ids at
  // first_position - n .. first_position - 1 (-1 below position 0). Empty otherwise.
  std::vector<TokenId> lookback_ids;
  // Block table diff: truncate the runner's table to n_blocks − new_block_ids.size(), append
  // new_block_ids. block_table_reset: first step of an admission; new_block_ids is the whole table.
  bool block_table_reset = false;
  int32_t n_blocks = 0;
  std::vector<kv::BlockId> new_block_ids;
};

struct BatchPlan {
  uint64_t step_id = 0;
  std::vector<SeqPlan> seqs;
  int32_t n_tokens_scheduled = 0;
  std::vector<SeqId> preempted_ids;  // preempted while building this plan (drop per-seq caches)
  std::vector<SeqId> finished_ids;   // finished since the previous plan
  std::vector<SeqId> aborted_ids;    // aborted since the previous plan
  bool empty() const { return seqs.empty(); }
};

// Engine → update(): one per plan.seqs entry, same order.
struct SeqOutput {
  SeqId seq_id = 0;
  // needs_logits: the accepted drafts (a prefix of the plan's drafts) then one sampled token.
  // Otherwise empty.
  std::vector<TokenId> tokens;
  FinishReason finish = FinishReason::kNone;  // kStop when the engine saw a stop condition
};

// update() → engine: tokens appended to a sequence and, if it ended, why.
struct SeqEvent {
  SeqId seq_id = 0;
  std::vector<TokenId> tokens;
  FinishReason finish = FinishReason::kNone;
  int32_t n_drafts_accepted = 0;
  int32_t n_prompt_cached = 0;  // prompt tokens served from the prefix cache at first admission
};

// Multi-line dump of a plan for logs and fatal-error reports.
std::string describe(const BatchPlan& plan);

}  // namespace deepinfer::sched

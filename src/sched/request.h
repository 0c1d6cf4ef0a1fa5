// Request: the scheduler's record of one sequence — its tokens (prompt then generated), their
// block hashes, progress and life-cycle state. Plain data; the Scheduler is the only writer.
//   kWaiting ──admit──▶ kPrefill ──last prompt chunk──▶ kDecode ──stop/length──▶ (finished)
//        ▲                  │ preempt (blocks ran out)      │
//        └── kPreempted ◀───┴───────────────────────────────┘       abort: from any state
#pragma once

#include <cstdint>
#include <vector>

#include "kv/types.h"

namespace deepinfer::sched {

using kv::SeqId;
using kv::TokenId;

enum class RequestState : uint8_t {
  kWaiting,    // queued, holds no KV resources
  kPrefill,    // running; tokens beyond the next one still need computing
  kDecode,     // running; every known token but the last sampled one is computed
  kPreempted,  // back in the queue (front) after its resources were taken; restarts by recompute
  kFinished,   // reported through finished_ids; the record is gone after that
  kAborted,
};
const char* request_state_name(RequestState state);

enum class FinishReason : uint8_t {
  kNone,
  kStop,     // the engine saw a stop token/string or the grammar ended
  kLength,   // max_new_tokens or the maximum sequence length reached
  kAborted,  // abort() by the caller
};
const char* finish_reason_name(FinishReason reason);

// What the engine submits.
struct RequestParams {
  SeqId id = 0;
  std::vector<TokenId> prompt;
  int32_t max_new_tokens = 0;  // 0: until the maximum sequence length
  uint64_t cache_salt = 0;     // prefix-cache namespace (tenant, LoRA); 0 = shared
  // Prompt logprobs (SamplingParams::prompt_logprobs): every prompt row whose next token is a
  // prompt token needs logits (SeqPlan::n_prompt_logit_rows), so the whole prompt is computed —
  // no prefix-cache hits are taken (its full blocks are still committed for others) — in chunks
  // of at most SchedulerConfig::max_prompt_logits_chunk tokens.
  bool prompt_logits = false;
};

struct Request {
  SeqId id = 0;
  RequestState state = RequestState::kWaiting;
  std::vector<TokenId> tokens;            // prompt followed by generated tokens
  int32_t n_prompt = 0;
  int32_t max_new_tokens = 0;
  bool prompt_logits = false;             // RequestParams::prompt_logits
  kv::BlockHash hash_root;
  std::vector<kv::BlockHash> block_hashes;  // one per full block of `tokens`
  int32_t n_computed = 0;                 // positions computed (0 unless running)
  int32_t n_tokens_cached = 0;            // H of the current admission
  int32_t n_hit_boundary = 0;             // snapshot-less hit boundary (snapshot policy input)
  int32_t n_prompt_cached = -1;           // H at the first admission (usage stats); -1 before
  int32_t n_preemptions = 0;
  uint64_t arrival_order = 0;
  uint64_t admit_order = 0;               // larger = admitted more recently (preemption victim)
  int64_t scheduled_step = -1;            // step_id of the last plan that included it
  std::vector<TokenId> draft_tokens;      // proposed for the next step; consumed by schedule()
  FinishReason pending_finish = FinishReason::kNone;  // abort/finish while its plan is in flight

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_generated() const { return n_tokens() - n_prompt; }
  bool is_running() const { return state == RequestState::kPrefill || state == RequestState::kDecode; }
};

}  // namespace deepinfer::sched

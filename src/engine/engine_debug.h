// Internal debug hooks of the engine (tests and tools only; not part of the public API): run the
// KV/scheduler integrity checks after every step, observe plans on the engine thread, inject a
// forward failure, and read a snapshot of the bookkeeping as of the last step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "deepinfer/engine.h"
#include "engine/image_inputs.h"
#include "sched/batch_plan.h"

namespace deepinfer::engine {

struct DebugOptions {
  // Stands in for the model's image encoder (tests of the image plumbing with spans of their own).
  std::shared_ptr<const ImageEncoder> image_encoder;
  // After every step (and every abort): Scheduler::check_integrity plus the runner's block tables
  // equal the manager's. The first failure is kept in DebugSnapshot::integrity.
  bool check_integrity_every_step = false;
  // Called on the engine thread with each non-empty plan before its forward. May call
  // Engine::abort (processed after the step).
  std::function<void(const sched::BatchPlan&)> on_plan;
  // The forward of the step with this step_id fails with INTERNAL (tests of the fatal path).
  int64_t fail_forward_at_step = -1;
  // Every step sampled on the host from the copied logits, even the ones the device would take
  // whole (tests compare the two paths).
  bool host_sampling = false;
  // Speculative decoding: called with each sequence's next drafts (the drafter's, possibly none)
  // before the confidence schedule and the grammar cut them; may replace them (tests: an oracle that knows the tokens
  // decoding without drafts gives, so every acceptance count is exercised). n_generated: the
  // tokens the sequence has generated so far, the one just sampled included.
  std::function<void(RequestId request, int32_t sample_index, int32_t n_generated, std::vector<int32_t>* drafts)>
      on_drafts;
};

struct DebugSnapshot {
  Status integrity;              // first integrity failure, OK if none
  int64_t n_integrity_checks = 0;
  int32_t n_live_requests = 0;   // requests with a sequence not finished
  int32_t n_live_sequences = 0;  // sequences known to the scheduler
  int32_t n_kv_seqs = 0;         // sequences holding KV resources
  int32_t n_runner_tables = 0;   // block tables mirrored by the runner (after the last plan)
  int32_t n_blocks = 0, n_free_blocks = 0;
  int32_t n_state_slots = 0, n_free_state_slots = 0;
  int32_t n_snapshot_pins = 0, n_pending_snapshots = 0;
  // Scheduler counters (prefix-cache paths taken): Σ H over admissions, Σ (H − R) replayed,
  // admissions that restored a state snapshot.
  int64_t n_tokens_prefix_hit = 0, n_tokens_replayed = 0, n_snapshot_restores = 0;
  // Times the idle loop gave the steps' host memory back (EngineImpl::run_loop).
  int64_t n_idle_memory_releases = 0;
};

// Opens an engine with debug hooks.
Result<std::unique_ptr<Engine>> open_engine(const EngineOptions& options, const DebugOptions& debug);
// The bookkeeping as of the last step (or abort); `engine` must come from open_engine/Engine::open.
DebugSnapshot debug_snapshot(const Engine& engine);

}  // namespace deepinfer::engine

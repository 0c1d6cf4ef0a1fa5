// Human-readable BatchPlan dump (the engine prints it when a step fails fatally).
#include "sched/batch_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace deepinfer::sched {

const char* state_init_name(StateInit init) {
  switch (init) {
    case StateInit::kKeep: return "keep";
    case StateInit::kReset: return "reset";
    case StateInit::kRestoreSnapshot: return "restore";
  }
  return "?";
}

std::string describe(const BatchPlan& plan) {
  std::string out = fmt::format("plan {}: {} seqs, {} tokens; preempted [{}] finished [{}] aborted [{}]\n",
                                plan.step_id, plan.seqs.size(), plan.n_tokens_scheduled,
                                fmt::join(plan.preempted_ids, ","), fmt::join(plan.finished_ids, ","),
                                fmt::join(plan.aborted_ids, ","));
  for (const SeqPlan& s : plan.seqs) {
    out += fmt::format(
        "  seq {} slot {} init {} restore {} take {} pos {} n {} drafts {} H {} floor {} logits {}{} "
        "blocks {}{} +[{}]\n",
        s.seq_id, s.state_slot, state_init_name(s.state_init), s.snapshot_restore, s.snapshot_take,
        s.first_position, s.n_tokens_scheduled, s.n_draft_tokens, s.n_history_cached, s.window_floor,
        s.needs_logits ? 1 : 0,
        s.n_prompt_logit_rows > 0 ? fmt::format(" prompt-logit rows {}", s.n_prompt_logit_rows) : std::string(),
        s.n_blocks, s.block_table_reset ? " (reset)" : "",
        fmt::join(s.new_block_ids, ","));
  }
  return out;
}

}  // namespace deepinfer::sched

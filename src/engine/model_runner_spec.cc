// ModelRunner, speculative decoding (model_runner.h): the rewind of rejected drafts and the two
// drafters. Engine-level speculative decoding (docs/engine.md "Speculative decoding"):
//   * rewind: nothing to undo on the device. The state is positional (window rings and compressor
//     states hold position p at p % ring) with as many spare positions as drafts, so the rows a
//     rejected draft wrote lie past the sequence's end — written again before anything reads
//     them — and the rows they overwrote were older than anything the next positions read; only
//     the host's records of where rings are valid move back (KvState::forget_from);
//   * MTP (V4, model_v4_flash.md §4.11): mtp.0 runs over every position the target ran, with the
//     target's final HC state at i and the token at i + 1 (its ring holds those rows only); for
//     k drafts it then chains k - 1 rows on its own output state (past the end, as above);
//   * DSpark (V4.1, model_v41_flash.md §7.2): forward() seeded the stage rings; one pass over the
//     block [t, noise x (B - 1)] at the next positions gives B Markov-chained drafts and their
//     confidence logits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "engine/model_runner.h"

namespace deepinfer::engine {

using tensor::DType;
using tensor::TensorView;

void ModelRunner::add_rows(model::ForwardBatch& b, const sched::SeqPlan& sp, int32_t first,
                           std::span<const int32_t> ids, int32_t window_floor) {
  const auto begin = static_cast<int32_t>(b.token_ids.size());
  const auto n = static_cast<int32_t>(ids.size());
  b.seqs.push_back(ops::SeqSpan{sp.state_slot, begin, n, first, sp.n_history_cached, window_floor});
  b.n_prompt.push_back(sp.n_prompt);
  for (int32_t j = 0; j < n; ++j) {
    b.token_ids.push_back(ids[static_cast<size_t>(j)]);
    b.positions.push_back(first + j);
  }
}

void ModelRunner::fill_tables(model::ForwardBatch& b, const sched::BatchPlan& plan, std::span<const size_t> rows) const {
  DI_CHECK(rows.size() == b.seqs.size(), "fill_tables: {} plan rows for {} sequences", rows.size(), b.seqs.size());
  const int32_t block_tokens = state_.options().block_tokens;
  size_t max_blocks = 1;
  for (size_t s = 0; s < rows.size(); ++s) {
    const ops::SeqSpan& span = b.seqs[s];
    const auto cover = static_cast<size_t>((span.start_pos + span.n_tokens - 1) / block_tokens + 1);
    max_blocks = std::max({max_blocks, cover, tables_.at(plan.seqs[rows[s]].seq_id).size()});
  }
  b.max_blocks = static_cast<int32_t>(max_blocks);
  b.block_tables.assign(rows.size() * max_blocks, -1);
  for (size_t s = 0; s < rows.size(); ++s) {
    const std::vector<kv::BlockId>& t = tables_.at(plan.seqs[rows[s]].seq_id);
    std::copy(t.begin(), t.end(), b.block_tables.begin() + static_cast<std::ptrdiff_t>(s * max_blocks));
  }
}

Status ModelRunner::rewind(const sched::BatchPlan& plan, std::span<const int32_t> n_valid) {
  DI_CHECK(n_valid.size() == plan.seqs.size(), "rewind: {} counts for {} rows", n_valid.size(), plan.seqs.size());
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const sched::SeqPlan& sp = plan.seqs[i];
    if (sp.n_draft_tokens == 0 || n_valid[i] < 0 || n_valid[i] >= sp.n_tokens_scheduled) continue;
    if (n_valid[i] < sp.n_tokens_scheduled - sp.n_draft_tokens) {
      return internal_error("request {}: {} valid rows, fewer than the step's {} real ones", sp.seq_id, n_valid[i],
                            sp.n_tokens_scheduled - sp.n_draft_tokens);
    }
    // The rejected rows' ring entries lie past the sequence's end, where the next rows write
    // before anything reads them; the spare positions kept what they overwrote.
    state_.forget_from(sp.state_slot, sp.first_position + n_valid[i]);
  }
  return Status::ok();
}

void ModelRunner::rollback_table(kv::SeqId seq, size_t n_blocks) {
  auto it = tables_.find(seq);
  if (it != tables_.end() && it->second.size() > n_blocks) it->second.resize(n_blocks);
}

Result<std::vector<ModelRunner::Drafts>> ModelRunner::propose(const sched::BatchPlan& plan,
                                                             std::span<const DraftInput> inputs,
                                                             const DraftPicker& pick) {
  for (const DraftInput& in : inputs) {
    if (in.plan_row >= plan.seqs.size() || in.next.empty() ||
        static_cast<int32_t>(in.next.size()) > plan.seqs[in.plan_row].n_tokens_scheduled) {
      return internal_error("propose: draft input for plan row {} with {} tokens", in.plan_row, in.next.size());
    }
  }
  switch (drafter_) {
    case Drafter::kMtp: return propose_mtp(plan, inputs, pick);
    case Drafter::kDspark: return propose_dspark(plan, inputs);
    case Drafter::kNone: break;
  }
  return failed_precondition("propose: the engine runs without a drafter");
}

void ModelRunner::pick_on_host(const TensorView& logits, std::span<const size_t> live, int32_t j,
                               const DraftPicker& pick, std::vector<int32_t>* ids, std::vector<float>* prob) {
  const int64_t n = logits.shape[0], V = logits.shape[1];
  ids->assign(static_cast<size_t>(n), -1);
  prob->assign(static_cast<size_t>(n), 0.0f);
  std::vector<float> host(static_cast<size_t>(n * V));
  model_->ops->copy(logits, TensorView::contiguous(host.data(), DType::kF32, {n, V}));
  for (int64_t r = 0; r < n; ++r) {
    const float* row = &host[static_cast<size_t>(r * V)];
    const float best = *std::max_element(row, row + V);
    if (!std::isfinite(best)) continue;
    int64_t id = pick.host(live[static_cast<size_t>(r)], j, std::span<const float>(row, static_cast<size_t>(V)));
    if (id < 0 || id >= V) id = std::max_element(row, row + V) - row;
    double den = 0.0;
    for (int64_t v = 0; v < V; ++v) den += std::exp(static_cast<double>(row[v] - best));
    (*ids)[static_cast<size_t>(r)] = static_cast<int32_t>(id);
    (*prob)[static_cast<size_t>(r)] = static_cast<float>(std::exp(static_cast<double>(row[id] - best)) / den);
  }
}

Result<std::vector<ModelRunner::Drafts>> ModelRunner::propose_mtp(const sched::BatchPlan& plan,
                                                                 std::span<const DraftInput> inputs,
                                                                 const DraftPicker& pick) {
  ops::Ops& ops = *model_->ops;
  const loader::ModelConfig& c = model_->config;
  const int64_t hc = c.hc_mult, D = c.hidden_size, row_width = hc * D;
  std::vector<Drafts> out(inputs.size());
  if (spec_hidden_.empty() || token_begin_.size() != plan.seqs.size()) {
    return internal_error("propose: the MTP drafter has no hidden states of the plan's step");
  }
  const TensorView hidden_all =
      TensorView::contiguous(spec_hidden_.data, spec_hidden_.dtype, {spec_hidden_.numel() / row_width, row_width},
                             spec_hidden_.device);
  // Pass 1: every valid row of the step at its own position, with the token after it.
  model::ForwardBatch b;
  std::vector<int32_t> hidden_rows;
  std::vector<size_t> rows;      // b's plan rows
  std::vector<size_t> drafting;  // inputs that want drafts, in logit-row order
  for (size_t k = 0; k < inputs.size(); ++k) {
    const DraftInput& in = inputs[k];
    const sched::SeqPlan& sp = plan.seqs[in.plan_row];
    MtpRows& ring = mtp_rows_[sp.seq_id];
    if (ring.next != sp.first_position || ring.next <= ring.floor) ring.floor = sp.first_position;  // a gap
    add_rows(b, sp, sp.first_position, in.next, std::max(ring.floor, sp.window_floor));
    rows.push_back(in.plan_row);
    ring.next = sp.first_position + static_cast<int32_t>(in.next.size());
    for (size_t j = 0; j < in.next.size(); ++j) hidden_rows.push_back(token_begin_[in.plan_row] + static_cast<int32_t>(j));
    if (in.n_drafts > 0) {
      b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
      drafting.push_back(k);
    }
  }
  if (b.seqs.empty()) return out;
  fill_tables(b, plan, rows);
  b.keep_hidden = true;
  const int64_t T = static_cast<int64_t>(b.token_ids.size());
  ensure_room(spec_x_, T * row_width, [&](int64_t n) { return ops.alloc_persistent(spec_hidden_.dtype, {n}); });
  const TensorView h_in = TensorView::contiguous(spec_x_.data, spec_x_.dtype, {T, hc, D}, spec_x_.device);
  ops.gather_rows(hidden_all, hidden_rows, h_in.reshape({T, row_width}));
  DI_ASSIGN_OR_RETURN(model::ForwardResult r, model_->model->mtp_forward(b, h_in, state_));
  if (drafting.empty()) return out;

  // Chained rows: the MTP's own output state and the draft just made, one position further. Their
  // ring entries lie past the sequence's end (the next step's MTP rows write there first), and the
  // ring's spare positions keep the rows they overwrite. Picked on the device, each chained step
  // reads its tokens where the picks are (ForwardBatch::token_from), so the steps queue back to
  // back and the host waits once, for every pick. Their inputs (the chained state, the picks) sit
  // at the same addresses call after call, so the chained steps replay recorded step graphs.
  const bool on_host = static_cast<bool>(pick.host);
  // [2 parts][max_k][stride]: fixed strides (the most drafts and sequences a step holds).
  const int64_t max_k = state_.options().spare_positions;
  for (size_t k : drafting) {
    if (inputs[k].n_drafts > max_k) {
      return internal_error("propose: {} drafts wanted, the state keeps {} spare positions", inputs[k].n_drafts, max_k);
    }
  }
  const auto n_in = static_cast<int64_t>(drafting.size());
  const int64_t stride = std::max<int64_t>(n_state_slots_, n_in);
  ensure_room(spec_chain_x_, stride * row_width, [&](int64_t n) { return ops.alloc_persistent(spec_hidden_.dtype, {n}); });
  if (!on_host) {
    ensure_room(draft_picks_, 2 * max_k * stride, [&](int64_t n) { return ops.alloc_persistent(DType::kI32, {n}); });
  }
  // Step s's picks ([n] I32 ids, part 0) and their raw logprobs ([n] F32, part 1) on the device.
  auto picks = [&](int32_t s, int part, DType dtype, std::initializer_list<int64_t> shape) {
    return TensorView::contiguous(static_cast<int32_t*>(draft_picks_.data) + (part * max_k + s) * stride, dtype,
                                  shape, draft_picks_.device);
  };
  std::vector<std::vector<size_t>> live_at;  // device picks: each step's inputs, in pick order
  std::vector<int32_t> ids;
  std::vector<float> prob;
  std::vector<size_t> live = drafting;  // inputs still chaining, in r's logit-row order
  for (int32_t step = 0;; ++step) {
    const auto n_live = static_cast<int64_t>(live.size());
    std::vector<int32_t> keep;  // the state rows of the inputs that go on
    std::vector<size_t> next_live;
    if (on_host) {
      pick_on_host(r.logits, live, step, pick, &ids, &prob);
      for (size_t j = 0; j < live.size(); ++j) {
        if (ids[j] < 0) continue;  // nothing finite: its drafts end
        out[live[j]].tokens.push_back(ids[j]);
        out[live[j]].confidence.push_back(prob[j]);
        if (static_cast<int32_t>(out[live[j]].tokens.size()) < inputs[live[j]].n_drafts) {
          keep.push_back(static_cast<int32_t>(j));
          next_live.push_back(live[j]);
        }
      }
    } else {
      draft_plan_.clear();
      if (pick.device) {
        for (size_t j = 0; j < live.size(); ++j) pick.device(live[j], step, j, &draft_plan_);
      }
      draft_plan_.finish(static_cast<size_t>(n_live));
      queue_sampling(r.logits, draft_plan_, picks(step, 0, DType::kI32, {n_live}), picks(step, 1, DType::kF32, {n_live}),
                     picks(step, 0, DType::kI32, {n_live, 0}), picks(step, 1, DType::kF32, {n_live, 0}));
      live_at.push_back(live);
      for (size_t j = 0; j < live.size(); ++j) {
        if (step + 1 < inputs[live[j]].n_drafts) {
          keep.push_back(static_cast<int32_t>(j));
          next_live.push_back(live[j]);
        }
      }
    }
    if (next_live.empty()) break;
    const int64_t n = static_cast<int64_t>(next_live.size());
    const TensorView x = TensorView::contiguous(spec_chain_x_.data, spec_chain_x_.dtype, {n, hc, D}, spec_chain_x_.device);
    ops.gather_rows(r.hidden.reshape({r.hidden.shape[0], row_width}), keep, x.reshape({n, row_width}));
    model::ForwardBatch chain;
    std::vector<size_t> chain_rows;
    for (size_t i = 0; i < next_live.size(); ++i) {
      const size_t k = next_live[i];
      chain_rows.push_back(inputs[k].plan_row);
      const sched::SeqPlan& sp = plan.seqs[inputs[k].plan_row];
      const int32_t pos = sp.first_position + static_cast<int32_t>(inputs[k].next.size()) + step;
      const int32_t token = on_host ? out[k].tokens.back() : 0;  // else a placeholder: token_from
      add_rows(chain, sp, pos, std::span<const int32_t>(&token, 1), std::max(mtp_rows_[sp.seq_id].floor, sp.window_floor));
      chain.logit_rows.push_back(static_cast<int32_t>(chain.token_ids.size()) - 1);
      if (!on_host) chain.token_from.push_back(keep[i]);
    }
    if (!on_host) chain.token_source = picks(step, 0, DType::kI32, {n_live});
    fill_tables(chain, plan, chain_rows);
    chain.keep_hidden = true;
    Result<model::ForwardResult> next = model_->model->mtp_forward(chain, x, state_);
    if (!next.is_ok()) return next.status().with_context("chaining MTP drafts");
    r = std::move(*next);
    live = std::move(next_live);
  }
  if (!on_host) {
    // Every pick at once; an input whose pick had nothing finite ends its drafts there.
    std::vector<int32_t> host(static_cast<size_t>(2 * max_k * stride));
    ops.copy(TensorView::contiguous(draft_picks_.data, DType::kI32, {2 * max_k * stride}, draft_picks_.device),
             TensorView::contiguous(host.data(), DType::kI32, {2 * max_k * stride}));
    std::vector<bool> ended(inputs.size(), false);
    for (size_t s = 0; s < live_at.size(); ++s) {
      for (size_t j = 0; j < live_at[s].size(); ++j) {
        const size_t k = live_at[s][j];
        const size_t at = s * static_cast<size_t>(stride) + j;
        const int32_t id = host[at];
        if (ended[k] || id < 0) {
          ended[k] = true;
          continue;
        }
        float logprob;
        std::memcpy(&logprob, &host[static_cast<size_t>(max_k * stride) + at], sizeof(float));
        out[k].tokens.push_back(id);
        out[k].confidence.push_back(std::exp(logprob));
      }
    }
  }
  return out;
}

Result<std::vector<ModelRunner::Drafts>> ModelRunner::propose_dspark(const sched::BatchPlan& plan,
                                                                    std::span<const DraftInput> inputs) {
  const loader::ModelConfig& c = model_->config;
  const auto block = static_cast<int32_t>(c.dspark_block_size);
  std::vector<Drafts> out(inputs.size());
  model::ForwardBatch b;
  std::vector<size_t> drafting, rows;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const DraftInput& in = inputs[k];
    if (in.n_drafts <= 0) continue;  // the rings were seeded by the step's forward
    const sched::SeqPlan& sp = plan.seqs[in.plan_row];
    // The block: the token just sampled, then noise, at the positions after the valid rows (cut
    // short at the model's last position).
    const int32_t first = sp.first_position + static_cast<int32_t>(in.next.size());
    const auto rows_left = static_cast<int32_t>(std::min<int64_t>(block, c.max_position_embeddings - first));
    if (rows_left <= 0) continue;
    std::vector<int32_t> ids(static_cast<size_t>(rows_left), static_cast<int32_t>(c.dspark_noise_token_id));
    ids[0] = in.next.back();
    add_rows(b, sp, first, ids, sp.window_floor);
    drafting.push_back(k);
    rows.push_back(in.plan_row);
  }
  if (drafting.empty()) return out;
  fill_tables(b, plan, rows);
  DI_ASSIGN_OR_RETURN(model::ForwardResult r, model_->model->mtp_forward(b, TensorView{}, state_));
  for (size_t j = 0; j < drafting.size(); ++j) {
    const DraftInput& in = inputs[drafting[j]];
    const size_t begin = static_cast<size_t>(b.seqs[j].token_begin);
    // Row i proposes the token at the block's position i + 1.
    for (int32_t i = 0; i < std::min(in.n_drafts, b.seqs[j].n_tokens); ++i) {
      out[drafting[j]].tokens.push_back(r.draft_tokens[begin + static_cast<size_t>(i)]);
      out[drafting[j]].confidence.push_back(1.0f / (1.0f + std::exp(-r.confidence[begin + static_cast<size_t>(i)])));
    }
  }
  return out;
}

}  // namespace deepinfer::engine

// ModelRunner (see model_runner.h): plan → ForwardBatch, state-slot duties, snapshot copies.
// Mapping SeqPlan → SeqSpan: first_position → start_pos, n_history_cached → n_cached (rows of
// groups completing below it are shared: read, never written), window_floor unchanged.
#include "engine/model_runner.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "base/status.h"

namespace deepinfer::engine {
namespace {

// ForwardBatch::engram_lookback holds n ids per sequence (-1: use the slot's own history); it is
// created on the first sequence that carries any.
void add_lookback(model::ForwardBatch& b, size_t seq, size_t n_seqs, const std::vector<int32_t>& ids) {
  const size_t n = ids.size();
  if (b.engram_lookback.empty()) b.engram_lookback.assign(n_seqs * n, -1);
  std::copy(ids.begin(), ids.end(), b.engram_lookback.begin() + static_cast<std::ptrdiff_t>(seq * n));
}

}  // namespace

ModelRunner::ModelRunner(LoadedModel* model, const model::KvStateOptions& state, int32_t n_state_slots,
                         Drafter drafter)
    : model_(model),
      state_(model->config, state, model->ops.get()),
      n_state_slots_(n_state_slots),
      n_snapshot_slots_(state.n_slots - n_state_slots),
      drafter_(drafter) {
  DI_CHECK(n_snapshot_slots_ >= 0, "ModelRunner: {} KV state slots for {} sequences", state.n_slots, n_state_slots);
}

std::span<const kv::BlockId> ModelRunner::block_table(kv::SeqId seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second;
}

Status ModelRunner::apply_table_diff(const sched::SeqPlan& sp) {
  std::vector<kv::BlockId>& t = tables_[sp.seq_id];
  if (sp.block_table_reset) {
    t = sp.new_block_ids;
  } else {
    const int64_t n_keep = int64_t{sp.n_blocks} - static_cast<int64_t>(sp.new_block_ids.size());
    if (n_keep < 0 || n_keep > static_cast<int64_t>(t.size())) {
      return internal_error("request {}: block-table diff keeps {} of {} blocks", sp.seq_id, n_keep, t.size());
    }
    t.resize(static_cast<size_t>(n_keep));
    t.insert(t.end(), sp.new_block_ids.begin(), sp.new_block_ids.end());
  }
  return Status::ok();
}

Status ModelRunner::init_state(const sched::SeqPlan& sp) {
  if (sp.state_slot < 0 || sp.state_slot >= n_state_slots_) {
    return internal_error("request {}: state slot {} outside [0, {})", sp.seq_id, sp.state_slot, n_state_slots_);
  }
  switch (sp.state_init) {
    case sched::StateInit::kKeep: break;
    case sched::StateInit::kReset: state_.reset_slot(sp.state_slot); break;
    case sched::StateInit::kRestoreSnapshot:
      if (sp.snapshot_restore < 0 || sp.snapshot_restore >= n_snapshot_slots_) {
        return internal_error("request {}: snapshot {} outside [0, {})", sp.seq_id, sp.snapshot_restore,
                              n_snapshot_slots_);
      }
      state_.copy_slot(n_state_slots_ + sp.snapshot_restore, sp.state_slot);
      break;
  }
  return Status::ok();
}

Result<model::ForwardBatch> ModelRunner::prepare(const sched::BatchPlan& plan, std::vector<int32_t>* logit_row) {
  for (const auto* ids : {&plan.preempted_ids, &plan.finished_ids, &plan.aborted_ids}) {
    for (kv::SeqId id : *ids) drop(id);
  }
  model::ForwardBatch b;
  logit_row->assign(plan.seqs.size(), -1);
  size_t max_blocks = 1;
  for (const sched::SeqPlan& sp : plan.seqs) {
    DI_RETURN_IF_ERROR(apply_table_diff(sp));
    DI_RETURN_IF_ERROR(init_state(sp));
    // Drafts to verify: the state's spare positions keep what rejected ones overwrite (rewind).
    if (sp.n_draft_tokens > 0) {
      if (drafter_ == Drafter::kNone) return internal_error("request {}: drafts without a drafter", sp.seq_id);
      if (sp.n_draft_tokens > state_.options().spare_positions) {
        return internal_error("request {}: {} drafts, the state keeps {} spare positions", sp.seq_id,
                              sp.n_draft_tokens, state_.options().spare_positions);
      }
    }
    max_blocks = std::max(max_blocks, tables_[sp.seq_id].size());
  }
  // The MTP drafter reads every row's final hidden state.
  b.keep_hidden_all = drafter_ == Drafter::kMtp;
  token_begin_.clear();
  b.max_blocks = static_cast<int32_t>(max_blocks);
  b.block_tables.reserve(plan.seqs.size() * max_blocks);
  logit_row_scratch_.clear();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const sched::SeqPlan& sp = plan.seqs[i];
    const auto begin = static_cast<int32_t>(b.token_ids.size());
    token_begin_.push_back(begin);
    b.seqs.push_back(ops::SeqSpan{sp.state_slot, begin, sp.n_tokens_scheduled, sp.first_position,
                                  sp.n_history_cached, sp.window_floor});
    b.n_prompt.push_back(sp.n_prompt);
    for (int32_t j = 0; j < sp.n_tokens_scheduled; ++j) {
      b.token_ids.push_back(sp.token_ids[static_cast<size_t>(j)]);
      b.positions.push_back(sp.first_position + j);
    }
    if (sp.token_from_device) {
      // Planned ahead: the input token is the one the last prepared step samples for this sequence.
      auto row = last_logit_row_.find(sp.seq_id);
      if (row == last_logit_row_.end() || sampled_dev_.empty() || sp.n_tokens_scheduled != 1) {
        return internal_error("request {}: planned ahead, but the last step sampled no token for it", sp.seq_id);
      }
      if (b.token_from.empty()) b.token_from.reserve(plan.seqs.size());
      b.token_from.resize(static_cast<size_t>(begin), -1);
      b.token_from.push_back(row->second);
    }
    // The last real token's row, then one per draft (verification): consecutive logit rows.
    if (sp.needs_logits) {
      (*logit_row)[i] = static_cast<int32_t>(b.logit_rows.size());
      logit_row_scratch_[sp.seq_id] = (*logit_row)[i];
      for (int32_t j = sp.n_draft_tokens; j >= 0; --j) b.logit_rows.push_back(begin + sp.n_tokens_scheduled - 1 - j);
    }
    const auto images = images_.find(sp.seq_id);
    const ImageSpans* spans = images == images_.end() ? nullptr : images->second.get();
    if (spans != nullptr) spans->collect(sp.first_position, sp.n_tokens_scheduled, begin, &b.image_rows, &b.image_embeds);
    if (!sp.lookback_ids.empty()) {
      std::vector<int32_t> ids = sp.lookback_ids;
      const int32_t first = sp.first_position - static_cast<int32_t>(ids.size());
      for (size_t k = 0; spans != nullptr && k < ids.size(); ++k)
        if (spans->contains(first + static_cast<int32_t>(k))) ids[k] = model::kEngramLookbackImage;
      add_lookback(b, i, plan.seqs.size(), ids);
    }
    const std::vector<kv::BlockId>& t = tables_[sp.seq_id];
    b.block_tables.insert(b.block_tables.end(), t.begin(), t.end());
    b.block_tables.resize(b.block_tables.size() + (max_blocks - t.size()), -1);
  }
  if (!b.token_from.empty()) {
    b.token_from.resize(b.token_ids.size(), -1);
    b.token_source = tensor::TensorView::contiguous(sampled_dev_.data, tensor::DType::kI32, {last_rows_},
                                                    sampled_dev_.device);
  }
  last_logit_row_.swap(logit_row_scratch_);
  last_rows_ = static_cast<int64_t>(b.logit_rows.size());
  add_prompt_logit_rows(plan, b);
  return b;
}

Result<model::ForwardResult> ModelRunner::forward(const model::ForwardBatch& batch) {
  Result<model::ForwardResult> r = model_->model->forward(batch, state_);
  if (r.is_ok() && batch.keep_hidden_all) {
    // Kept past the workspace's life: the drafter runs after sampling.
    const tensor::TensorView& h = r->hidden;
    ensure_room(spec_hidden_, h.numel(), [&](int64_t n) { return model_->ops->alloc_persistent(h.dtype, {n}); });
    model_->ops->copy(h, tensor::TensorView::contiguous(spec_hidden_.data, h.dtype, {h.numel()}, spec_hidden_.device)
                             .reshape({h.shape[0], h.shape[1], h.shape[2]}));
  }
  return r;
}

Status ModelRunner::logits_to_host(model::ForwardResult* result) {
  model::ForwardResult& r = *result;
  if (r.logits.device == tensor::Device::kCpu || r.logits.numel() == 0) return Status::ok();
  // Device logits: one copy per step into host memory ([rows, vocab] F32, contiguous), page-locked
  // (Ops::alloc_host).
  const int64_t rows = r.logits.shape[0], vocab = r.logits.shape[1];
  ensure_room(host_logits_, rows * vocab, [&](int64_t n) { return model_->ops->alloc_host(tensor::DType::kF32, {n}); });
  const tensor::TensorView host =
      tensor::TensorView::contiguous(host_logits_.data, tensor::DType::kF32, {rows, vocab});
  model_->ops->copy(r.logits, host);  // synchronous for host destinations
  r.logits = host;
  return Status::ok();
}

Status ModelRunner::sample_on_device(const tensor::TensorView& logits, const DeviceSamplePlan& plan,
                                     DeviceSampled* out) {
  SampleTicket ticket;
  DI_RETURN_IF_ERROR(launch_sampling(logits, plan, &ticket));
  return collect_sampling(ticket, out);
}

Status ModelRunner::launch_sampling(const tensor::TensorView& logits, const DeviceSamplePlan& plan,
                                    SampleTicket* ticket) {
  const std::vector<ops::Ops::SampleRow>& params = plan.rows;
  const int64_t rows = logits.numel() == 0 ? 0 : logits.shape[0];
  const int64_t n = plan.n_top;
  *ticket = SampleTicket{0, rows, n, next_host_buffer_};
  if (rows == 0) return Status::ok();
  if (static_cast<int64_t>(params.size()) != rows ||
      (plan.adjusts() && static_cast<int64_t>(plan.adjust_rows.size()) != rows)) {
    return internal_error("device sampling: {} row parameters ({} adjusted) for {} logit rows", params.size(),
                          plan.adjust_rows.size(), rows);
  }
  if (n > ops::Ops::kMaxLogprobTop) return internal_error("device sampling: {} top logprobs per row", n);
  ops::Ops& ops = *model_->ops;
  // [ids | logprob block] in one I32 buffer (F32 as its bits), so that a single copy brings
  // everything back. Persistent: a step planned ahead reads the ids after this step's workspace is
  // gone (a larger buffer replaces it; step graphs key take_tokens by its address).
  const int64_t width = n >= 0 ? 3 + 2 * n : 1;
  ensure_room(sampled_dev_, rows * width, [&](int64_t n) { return ops.alloc_persistent(tensor::DType::kI32, {n}); });
  const tensor::TensorView ids =
      tensor::TensorView::contiguous(sampled_dev_.data, tensor::DType::kI32, {rows}, sampled_dev_.device);
  queue_sampling(logits, plan, ids, {}, {}, {});
  if (n >= 0) queue_logprob_block(logits, ids, static_cast<int32_t*>(sampled_dev_.data) + rows, n, sampled_dev_.device);
  ticket->copy = copy_back(sampled_dev_, rows * width, sampled_host_[ticket->buffer]);
  next_host_buffer_ ^= 1;
  return Status::ok();
}

void ModelRunner::queue_logprob_block(const tensor::TensorView& logits, const tensor::TensorView& tokens,
                                      int32_t* block, int64_t n, tensor::Device device) {
  const int64_t rows = tokens.numel();
  auto part = [&](tensor::DType dtype, int64_t at, std::initializer_list<int64_t> shape) {
    return tensor::TensorView::contiguous(block + at * rows, dtype, shape, device);
  };
  model_->ops->logprob_rows(logits, tokens, part(tensor::DType::kF32, 0, {rows}),
                            part(tensor::DType::kI32, 2, {rows, n}), part(tensor::DType::kF32, 2 + n, {rows, n}));
  model_->ops->token_rank_rows(logits, tokens, part(tensor::DType::kI32, 1, {rows}));
}

void ModelRunner::read_logprob_block(const int32_t* block, int64_t rows, int64_t n, std::vector<float>* logprob,
                                     std::vector<int32_t>* rank, std::vector<int32_t>* top_ids,
                                     std::vector<float>* top_logprobs) {
  const auto R = static_cast<size_t>(rows), N = static_cast<size_t>(n);
  logprob->resize(R);
  rank->resize(R);
  top_ids->resize(R * N);
  top_logprobs->resize(R * N);
  if (R == 0) return;
  std::memcpy(logprob->data(), block, R * sizeof(float));
  std::copy_n(block + R, R, rank->begin());
  std::copy_n(block + 2 * R, R * N, top_ids->begin());
  std::memcpy(top_logprobs->data(), block + (2 + N) * R, R * N * sizeof(float));
}

uint64_t ModelRunner::copy_back(const tensor::TensorView& dev, int64_t count, tensor::TensorView& host) {
  ops::Ops& ops = *model_->ops;
  ensure_room(host, count, [&](int64_t k) { return ops.alloc_host(tensor::DType::kI32, {k}); });
  return ops.copy_to_host_async(tensor::TensorView::contiguous(dev.data, tensor::DType::kI32, {count}, dev.device),
                                tensor::TensorView::contiguous(host.data, tensor::DType::kI32, {count}, host.device));
}

void ModelRunner::queue_sampling(const tensor::TensorView& logits, const DeviceSamplePlan& plan,
                                 const tensor::TensorView& ids, const tensor::TensorView& logprob,
                                 const tensor::TensorView& top_ids, const tensor::TensorView& top_logprobs) {
  ops::Ops& ops = *model_->ops;
  const int64_t rows = logits.shape[0];
  // Steps 1-4 (bias, masks, stop suppression, penalties) into a processed copy; raw logprobs
  // still read the model's logits.
  tensor::TensorView sampled_from = logits;
  if (plan.adjusts()) {
    sampled_from = ops.alloc(tensor::DType::kF32, {rows, logits.shape[1]});  // [rows, V] steps 0-4
    ops.adjust_logits(logits, plan.adjust_rows, plan.entries, plan.stops, plan.masks, plan.pending_ids, sampled_from);
  }
  const bool greedy =
      std::all_of(plan.rows.begin(), plan.rows.end(), [](const ops::Ops::SampleRow& s) { return s.temperature == 0.0f; });
  if (greedy) {
    ops.argmax_rows(sampled_from, ids);
  } else {
    ops.sample_rows(sampled_from, plan.rows, ids);
  }
  if (!logprob.empty()) ops.logprob_rows(logits, ids, logprob, top_ids, top_logprobs);
}

Status ModelRunner::collect_sampling(const SampleTicket& ticket, DeviceSampled* out) {
  const int64_t rows = ticket.rows, n = ticket.n_top;
  out->n_top = static_cast<int32_t>(n);
  out->ids.assign(static_cast<size_t>(rows), -1);
  out->logprob.clear();
  out->rank.clear();
  out->top_ids.clear();
  out->top_logprobs.clear();
  if (rows == 0) return Status::ok();
  model_->ops->wait_host_copy(ticket.copy);
  const int32_t* host = sampled_host_[ticket.buffer].as<const int32_t>();
  std::copy_n(host, rows, out->ids.begin());
  if (n >= 0) read_logprob_block(host + rows, rows, n, &out->logprob, &out->rank, &out->top_ids, &out->top_logprobs);
  return Status::ok();
}

sample::RowOutput ModelRunner::DeviceSampled::row_output(size_t row, std::optional<int32_t> logprobs) const {
  sample::RowOutput out;
  out.token = ids[row];
  if (!logprobs.has_value()) {
    out.logprob = out.token == sample::kNoToken ? -std::numeric_limits<float>::infinity() : 0.0f;
    return out;
  }
  out.logprob = logprob[row];
  out.rank = rank[row];
  const auto n = static_cast<size_t>(n_top);
  for (size_t j = 0; j < static_cast<size_t>(*logprobs) && j < n; ++j) {
    const int32_t id = top_ids[row * n + j];
    if (id >= 0) out.top_logprobs.push_back(TokenLogprob{id, top_logprobs[row * n + j]});
  }
  return out;
}

void ModelRunner::take_snapshots(const sched::BatchPlan& plan) {
  for (const sched::SeqPlan& sp : plan.seqs) {
    if (sp.snapshot_take != kv::kNoId) state_.copy_slot(sp.state_slot, n_state_slots_ + sp.snapshot_take);
  }
}

}  // namespace deepinfer::engine

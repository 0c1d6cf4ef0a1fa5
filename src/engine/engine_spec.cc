// Speculative decoding in the engine step (docs/engine.md "Speculative decoding"): the drafts'
// verification, the rewind of rejected ones and the next drafts.
//
// Row j of a row with k drafts has the sampler input a step without drafts would have at its
// position (penalty history, grammar mask, min_tokens count, all advanced by the tokens accepted
// before it). Greedy rows accept a draft while it is the argmax. Sampled rows, by
// EngineOptions::spec_verification:
//   * rejection (default; grammar_sampling_determinism.md §4.1): standard chain rejection sampling
//     — draft x drawn from the drafter's q is accepted with probability min(1, p(x) / q(x)), the
//     first rejection draws the correction from normalize(max(p − q, 0)), full acceptance a bonus
//     token from p. Lossless and the most acceptances; the MTP's q of each draft is kept on its
//     sequence (sample::DraftLaw) from the step that proposes to the step that verifies;
//   * coupled (§5.3, the deterministic option): row j is sampled with the same noise decoding
//     without drafts would use there and the draft is accepted when it is that token, so what is
//     sampled never depends on the drafts, only how many steps it takes: outputs with drafts are
//     those without, token for token, given row-for-row logits (the CPU backend's are batch- and
//     chunk-invariant).
#include <algorithm>
#include <optional>

#include "engine/draft_budget.h"
#include "engine/engine_impl.h"
#include "sample/keyed_noise.h"

namespace deepinfer::engine {
namespace {

// Row j of a sampled row's k drafts under rejection sampling: the draft there judged against the
// drafter's law, or past the drafts the bonus token — or the residual of a draft given up for its
// value (DraftLaw::cut_at). `p` is scratch for the target's distribution ([n_vocab]).
sample::RowOutput rejection_row(const sample::Sampler& sampler, std::span<const float> logits,
                                const sample::RowInput& in, const sample::DraftLaw& law, int32_t j, int32_t k,
                                int32_t draft, std::vector<float>* p) {
  auto q_row = [&](int32_t i) {
    return static_cast<size_t>(i) < law.q.size() ? std::span<const float>(law.q[static_cast<size_t>(i)])
                                                 : std::span<const float>();
  };
  const bool residual = j == k && law.cut_at == k;
  if (j == k && !residual) return sampler.sample_row(logits, in);
  p->resize(logits.size());
  if (!sampler.sampling_probs(logits, in, *p)) return sample::RowOutput{};  // nothing allowed
  const int32_t token = residual ? sample::sample_residual(*p, law.cut_token, q_row(k), in.seed, in.position)
                                 : sample::verify_rejection_row(*p, draft, q_row(j), in.seed, in.position).token;
  if (token < 0) return sample::RowOutput{};
  return sampler.output_for(logits, in, token);
}

}  // namespace

Result<sched::SeqOutput> EngineImpl::verify_drafts(const sched::SeqPlan& sp, const model::ForwardResult& result,
                                                   int32_t logit_row, SequenceState& s,
                                                   const ModelRunner::DeviceSampled* device) {
  sched::SeqOutput out{sp.seq_id, {}, sched::FinishReason::kNone};
  const int32_t k = sp.n_draft_tokens, n_real = sp.n_tokens_scheduled - k;
  auto draft = [&](int32_t j) { return sp.token_ids[static_cast<size_t>(n_real + j)]; };
  const bool rejection = verifies_by_rejection(*s.params);
  const sample::DraftLaw law = std::move(s.draft_law);  // read once: the next drafts bring their own
  s.draft_law = {};
  if (rejection) {
    if (device != nullptr) return internal_error("request {}: rejection sampling needs the host's rows", sp.seq_id);
    for (int32_t j = 0; j < k; ++j) {
      if (static_cast<size_t>(j) >= law.tokens.size() || law.tokens[static_cast<size_t>(j)] != draft(j)) {
        return internal_error("request {}: draft {} verified is not the one proposed", sp.seq_id, j);
      }
    }
  }
  int64_t accepted = 0;
  for (int32_t j = 0; j <= k; ++j) {
    sample::RowOutput token;
    if (device != nullptr) {
      token = device->row_output(static_cast<size_t>(logit_row + j), s.params->logprobs);
    } else {
      // Row j's input is the token at first + n_real - 1 + j; it samples the next position's token.
      const int64_t position = int64_t{sp.first_position} + n_real + j;
      DI_ASSIGN_OR_RETURN(sample::RowInput in, outputs_->row_input(s, position));
      DI_RETURN_IF_ERROR(sampler_->check_row(in, static_cast<size_t>(logit_row + j)));
      const float* row = result.logits.as<const float>() + (int64_t{logit_row} + j) * result.logits.stride[0];
      const std::span<const float> logits(row, static_cast<size_t>(result.logits.shape[1]));
      token = rejection ? rejection_row(*sampler_, logits, in, law, j, k, j < k ? draft(j) : -1, &verify_probs_)
                        : sampler_->sample_row(logits, in);
    }
    if (token.token == sample::kNoToken) {
      return invalid_argument("every token is excluded (allowed_token_ids, logit_bias, grammar): nothing to sample");
    }
    DI_ASSIGN_OR_RETURN(sched::FinishReason finish, outputs_->accept_token(s, token));
    out.tokens.push_back(token.token);
    // (Under rejection sampling a correction equal to the draft — only where rounding left p == q
    // — continues too: the next row's logits were computed with that very token.)
    const bool is_draft = j < k && token.token == draft(j);
    accepted += is_draft ? 1 : 0;
    if (finish != sched::FinishReason::kNone) {
      out.finish = finish;
      break;
    }
    if (!is_draft) break;
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.n_draft_tokens += k;
  stats_.n_accepted_draft_tokens += accepted;
  ++stats_.n_draft_rows;
  return out;
}

Status EngineImpl::speculate(const sched::BatchPlan& plan, const std::vector<sched::SeqOutput>& outputs) {
  next_drafts_.clear();
  std::vector<int32_t> n_valid(plan.seqs.size(), -1);
  std::vector<ModelRunner::DraftInput> inputs;
  const bool mtp = runner_->drafter() == Drafter::kMtp;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const sched::SeqPlan& sp = plan.seqs[i];
    const sched::SeqOutput& out = outputs[i];
    const sched::Request* req = scheduler_->find(sp.seq_id);
    // Ended (abort, error, stop, length): its state is never read again.
    if (req == nullptr || req->pending_finish != sched::FinishReason::kNone || outputs_->find(sp.seq_id) == nullptr ||
        out.finish != sched::FinishReason::kNone) {
      continue;
    }
    const int32_t n_real = sp.n_tokens_scheduled - sp.n_draft_tokens;
    ModelRunner::DraftInput in;
    in.plan_row = i;
    if (!sp.needs_logits) {
      // A prompt chunk before the last: only the MTP's ring follows it (the DSpark rings were
      // seeded by the forward); the token after its last row is the prompt's next.
      if (!mtp) continue;
      const auto end = static_cast<size_t>(sp.first_position + n_real);
      if (end >= req->tokens.size()) return internal_error("request {}: prompt chunk ends past its tokens", sp.seq_id);
      in.next.assign(sp.token_ids.begin() + 1, sp.token_ids.begin() + n_real);
      in.next.push_back(req->tokens[end]);
    } else {
      if (out.tokens.empty()) continue;  // failed in sampling: ended
      const int32_t valid = n_real + static_cast<int32_t>(out.tokens.size()) - 1;
      if (sp.n_draft_tokens > 0) n_valid[i] = valid;
      in.next.assign(sp.token_ids.begin() + 1, sp.token_ids.begin() + valid);
      in.next.push_back(out.tokens.back());
      // No more drafts than the sequence has room for (the scheduler would drop the rest; the
      // drafter's rows must stay inside the model's positions).
      const int64_t n_after = static_cast<int64_t>(req->tokens.size() + out.tokens.size());
      in.n_drafts = static_cast<int32_t>(std::clamp<int64_t>(scheduler_->max_seq_tokens() - n_after - 1, 0,
                                                             config_.sched.max_draft_tokens));
    }
    inputs.push_back(std::move(in));
  }
  DI_RETURN_IF_ERROR(runner_->rewind(plan, n_valid));
  if (inputs.empty()) return Status::ok();
  // MTP drafts are drawn by the request's own sampler (its bias, penalties, min_tokens, the
  // grammar's mask for the first) at the positions they would occupy; greedy requests: the argmax
  // of their adjusted logits. Coupled verification: with the request's own noise, so wherever the
  // drafter's distribution is close to the target's it proposes the very token verification samples
  // there. Rejection sampling: with noise of their own (sample::draft_seed), each draft's
  // distribution q kept for verification — so those picks run on the host, from copied logits.
  // Other picks run where the logits are unless the host samples everything
  // (DebugOptions::host_sampling); a row whose input cannot be built is picked greedily.
  std::vector<std::vector<std::vector<float>>> laws(inputs.size());  // [input][draft][n_vocab] q rows
  bool keep_laws = false;
  for (size_t k = 0; k < inputs.size() && mtp; ++k) {
    const SequenceState* s = outputs_->find(plan.seqs[inputs[k].plan_row].seq_id);
    keep_laws |= inputs[k].n_drafts > 0 && s != nullptr && verifies_by_rejection(*s->params);
  }
  auto row_input = [&](size_t k, int32_t j) -> std::optional<sample::RowInput> {
    const sched::SeqPlan& sp = plan.seqs[inputs[k].plan_row];
    SequenceState* s = outputs_->find(sp.seq_id);
    if (s == nullptr) return std::nullopt;
    const int64_t position = int64_t{sp.first_position} + static_cast<int64_t>(inputs[k].next.size()) + 1 + j;
    Result<sample::RowInput> in = outputs_->row_input(*s, position);
    if (!in.is_ok()) return std::nullopt;
    if (j > 0) in->token_bitmask = {};  // the grammar's mask follows the accepted tokens only
    if (!sampler_->check_row(*in, 0).is_ok()) return std::nullopt;
    return std::move(*in);
  };
  ModelRunner::DraftPicker pick;
  pick.device = [&](size_t k, int32_t j, size_t row, DeviceSamplePlan* device) {
    if (std::optional<sample::RowInput> in = row_input(k, j)) device->add(row, *in, sampler_->config(), -1);
  };
  if (debug_.host_sampling || keep_laws) {
    pick.host = [&](size_t k, int32_t j, std::span<const float> logits) -> int32_t {
      std::vector<float>& q = laws[k].emplace_back();  // one row per pick: empty = deterministic
      std::optional<sample::RowInput> in = row_input(k, j);
      if (!in) return -1;
      if (!verifies_by_rejection(*in->params)) return sampler_->sample_row(logits, *in).token;
      // Drawn from q itself, with noise of its own: the very law verification judges it by.
      q.resize(logits.size());
      if (!sampler_->sampling_probs(logits, *in, q)) {
        q.clear();
        return -1;  // nothing allowed: the argmax, deterministic
      }
      return sample::sample_weights(q, sample::draft_seed(in->seed), sample::NoiseStream::kToken, in->position);
    };
  }
  DI_ASSIGN_OR_RETURN(std::vector<ModelRunner::Drafts> drafts, runner_->propose(plan, inputs, pick));
  for (size_t k = 0; k < inputs.size(); ++k) {
    // A sampled draft's confidence under rejection sampling is its q's largest probability, not
    // the probability of the token drawn: the budget below must not drop drafts for what they are.
    std::vector<float>& c = drafts[k].confidence;
    for (size_t j = 0; j < std::min(c.size(), laws[k].size()); ++j) {
      if (!laws[k][j].empty()) c[j] = *std::max_element(laws[k][j].begin(), laws[k][j].end());
    }
  }
  if (debug_.on_drafts) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].n_drafts == 0) continue;
      const SequenceState* s = outputs_->find(plan.seqs[inputs[k].plan_row].seq_id);
      ModelRunner::Drafts& d = drafts[k];
      debug_.on_drafts(s->request_id, s->sample_index, s->n_generated, &d.tokens);
      d.confidence.resize(d.tokens.size(), 1.0f);
      laws[k].clear();  // a test's drafts: deterministic proposals
    }
  }
  if (options_.mtp_varlen) {
    // Confidence-scheduled verification: the load-aware global budget over every request's
    // survival estimates (draft_budget.h), the step's cost fitted from the steps so far.
    std::vector<std::vector<double>> survival;
    std::vector<size_t> drafting;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].n_drafts == 0) continue;
      std::vector<double>& s = survival.emplace_back();
      double p = 1.0;
      for (float c : drafts[k].confidence) s.push_back(p *= c);
      drafting.push_back(k);
    }
    const std::vector<int32_t> keep = draft_budget(survival, static_cast<int64_t>(drafting.size()), step_cost_,
                                                   options_.draft_min_survival);
    for (size_t r = 0; r < drafting.size(); ++r) drafts[drafting[r]].tokens.resize(static_cast<size_t>(keep[r]));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    ModelRunner::Drafts& d = drafts[k];
    if (inputs[k].n_drafts == 0) continue;  // a prompt chunk or no room: nothing to verify next
    const kv::SeqId seq = plan.seqs[inputs[k].plan_row].seq_id;
    SequenceState* s = outputs_->find(seq);
    // A grammar row's drafts end before the first token its grammar does not allow there: such a
    // draft is surely rejected, and the rows after it are verified for nothing.
    auto valid = static_cast<int32_t>(d.tokens.size());
    if (s != nullptr && s->matcher != nullptr) {
      valid = 0;
      while (static_cast<size_t>(valid) < d.tokens.size() && s->matcher->accept(d.tokens[static_cast<size_t>(valid)])) {
        ++valid;
      }
      DI_RETURN_IF_ERROR(s->matcher->rollback(valid));
    }
    if (s != nullptr && verifies_by_rejection(*s->params)) {
      // The budget above cut by position only; the grammar's cut, by value, is verified as a
      // rejection of that draft (DraftLaw::cut_at), whose q row is kept.
      sample::DraftLaw law;
      law.tokens.assign(d.tokens.begin(), d.tokens.begin() + valid);
      if (static_cast<size_t>(valid) < d.tokens.size()) {
        law.cut_at = valid;
        law.cut_token = d.tokens[static_cast<size_t>(valid)];
      }
      law.q = std::move(laws[k]);
      law.q.resize(std::min(law.q.size(), static_cast<size_t>(valid + (law.cut_at >= 0 ? 1 : 0))));
      s->draft_law = std::move(law);
    }
    d.tokens.resize(static_cast<size_t>(valid));
    if (!d.tokens.empty()) next_drafts_.emplace_back(seq, std::move(d.tokens));
  }
  return Status::ok();
}

}  // namespace deepinfer::engine

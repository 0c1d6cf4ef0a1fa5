// Engine end to end on the micro model: batch generation, streamed events, greedy output equal
// to a hand-driven forward/argmax loop, n > 1 seeds, stop token ids and stats.
#include <atomic>
#include <cmath>

#include "engine/loaded_model.h"
#include "engine_test_util.h"
#include "sample/keyed_noise.h"

namespace deepinfer {
namespace {

using testing::EventLog;
using testing::ids_request;
using testing::prompt_ids;

// Greedy decoding driven directly on the model: one prefill, then one token per forward.
std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int n_new) {
  auto lm = engine::load_model(testing::synthetic_model_dir("micro"), engine::LoadOptions{});
  EXPECT_TRUE(lm.is_ok());
  model::KvState state((*lm)->config, model::KvStateOptions{1, 16, 16, (*lm)->model->act_dtype()}, (*lm)->ops.get());
  state.reset_slot(0);
  std::vector<int32_t> seq = prompt, out;
  int32_t pos = 0;
  std::vector<int32_t> chunk = prompt;
  for (int i = 0; i < n_new; ++i) {
    model::ForwardBatch b;
    b.max_blocks = 16;
    for (int32_t b_id = 0; b_id < 16; ++b_id) b.block_tables.push_back(b_id);
    b.seqs.push_back(ops::SeqSpan{0, 0, static_cast<int32_t>(chunk.size()), pos, 0, 0});
    for (size_t j = 0; j < chunk.size(); ++j) {
      b.token_ids.push_back(chunk[j]);
      b.positions.push_back(pos + static_cast<int32_t>(j));
    }
    b.logit_rows.push_back(static_cast<int32_t>(chunk.size()) - 1);
    auto r = (*lm)->model->forward(b, state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    const float* l = r->logits.as<const float>();
    const int64_t V = r->logits.shape[1];
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + V) - l);
    pos += static_cast<int32_t>(chunk.size());
    out.push_back(next);
    chunk = {next};
  }
  return out;
}

TEST(EngineGenerateTest, GreedyEqualsHandDrivenModel) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  const auto prompt = prompt_ids(37, 11);
  auto tokens = testing::generate_tokens(*engine, {ids_request(prompt, 12, std::nullopt, 0.0f)});
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0], reference_greedy(prompt, 12));
  testing::expect_all_free(*engine);
}

// Steps whose rows are all greedy are sampled by Ops::argmax_rows where the logits are (on a GPU
// only the ids come back, with raw logprobs when asked); DebugOptions::host_sampling takes every
// step to the host sampler. Both give the same tokens, and the stats count the argmax steps.
TEST(EngineGenerateTest, PlainGreedyStepsTakeTheArgmaxAndMatchTheHostSampler) {
  const auto prompt = prompt_ids(29, 5);
  auto run = [&](bool host_sampling, int64_t* argmax_steps) {
    engine::DebugOptions debug;
    debug.host_sampling = host_sampling;
    auto engine = testing::open_micro(testing::micro_options(), debug);
    EXPECT_NE(engine, nullptr);
    if (engine == nullptr) return std::vector<std::vector<int32_t>>{};
    std::vector<Request> reqs{ids_request(prompt, 9, std::nullopt, 0.0f), ids_request(prompt_ids(30, 6), 9, 3, 0.0f)};
    reqs[1].sampling.logprobs = 2;
    auto tokens = testing::generate_tokens(*engine, reqs);
    *argmax_steps = engine->stats().n_argmax_steps;
    return tokens;
  };
  int64_t device_steps = -1, host_steps = -1;
  const auto by_argmax = run(false, &device_steps), by_sampler = run(true, &host_steps);
  ASSERT_EQ(by_argmax.size(), 2u);
  EXPECT_EQ(by_argmax, by_sampler);
  EXPECT_EQ(by_argmax[0], reference_greedy(prompt, 9));
  EXPECT_GE(device_steps, 9);  // every step that sampled (the prefill's last chunk and 8 decodes)
  EXPECT_EQ(host_steps, 0);
}

// Steps whose rows are greedy or temperature (top-k, top-p, min-p, raw logprobs allowed) are
// sampled by Ops::sample_rows where the logits are; the host sampler (DebugOptions::host_sampling)
// gives the same tokens.
TEST(EngineGenerateTest, TemperatureStepsSampledOnTheDeviceMatchTheHostSampler) {
  auto run = [&](bool host_sampling, EngineStats* stats) {
    engine::DebugOptions debug;
    debug.host_sampling = host_sampling;
    auto engine = testing::open_micro(testing::micro_options(), debug);
    EXPECT_NE(engine, nullptr);
    if (engine == nullptr) return std::vector<std::vector<int32_t>>{};
    std::vector<Request> reqs{ids_request(prompt_ids(21, 8), 10, 5, 0.9f), ids_request(prompt_ids(26, 9), 10, 6, 0.0f),
                              ids_request(prompt_ids(17, 10), 10, 7, 1.3f)};
    reqs[2].sampling.min_p = 0.05f;
    reqs[0].sampling.top_p = 0.9f;
    reqs[2].sampling.top_k = 20;
    reqs[1].sampling.logprobs = 1;
    auto tokens = testing::generate_tokens(*engine, reqs);
    *stats = engine->stats();
    return tokens;
  };
  EngineStats device, host;
  const auto on_device = run(false, &device), on_host = run(true, &host);
  ASSERT_EQ(on_device.size(), 3u);
  EXPECT_EQ(on_device, on_host);
  EXPECT_GE(device.n_device_sampled_steps, 10);  // every sampling step (the prompts share the first)
  EXPECT_EQ(device.n_argmax_steps, 0);           // none of them all greedy
  EXPECT_EQ(host.n_device_sampled_steps, 0);
  // The seeds matter: another seed gives other tokens (the rows are sampled, not argmax rows).
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  const auto reseeded = testing::generate_tokens(*engine, {ids_request(prompt_ids(21, 8), 10, 55, 0.9f)});
  ASSERT_EQ(reseeded.size(), 1u);
  EXPECT_NE(reseeded[0], on_device[0]);
}

// Raw logprobs (0, 3 and 20 top entries, greedy and sampled rows) computed where the logits are
// (Ops::logprob_rows) are the host sampler's: the same tokens, logprobs and top lists; a
// processed-mode row sends its steps to the host sampler, with the same results for the others.
TEST(EngineGenerateTest, RawLogprobsOnTheDeviceEqualTheHostSamplers) {
  auto run = [&](bool host_sampling, bool processed_row, EngineStats* stats) {
    engine::DebugOptions debug;
    debug.host_sampling = host_sampling;
    auto engine = testing::open_micro(testing::micro_options(), debug);
    EXPECT_NE(engine, nullptr);
    std::vector<GenerateOutput> outs;
    if (engine == nullptr) return outs;
    std::vector<Request> reqs{ids_request(prompt_ids(21, 8), 8, 5, 0.9f), ids_request(prompt_ids(26, 9), 8, 6, 0.0f),
                              ids_request(prompt_ids(17, 10), 8, 7, 1.3f), ids_request(prompt_ids(19, 11), 8, 8, 0.7f)};
    reqs[0].sampling.logprobs = 3;
    reqs[1].sampling.logprobs = 20;
    reqs[2].sampling.logprobs = 0;
    reqs[2].sampling.top_k = 30;
    if (processed_row) {
      reqs[3].sampling.logprobs = 2;
      reqs[3].sampling.logprobs_mode = LogprobsMode::kProcessed;
    }
    auto r = engine->generate(reqs);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (r.is_ok()) outs = *r;
    *stats = engine->stats();
    return outs;
  };
  EngineStats device, host, mixed;
  const auto on_device = run(false, false, &device), on_host = run(true, false, &host);
  ASSERT_EQ(on_device.size(), 4u);
  ASSERT_EQ(on_host.size(), 4u);
  EXPECT_GE(device.n_device_sampled_steps, 8);
  for (size_t i = 0; i < 4; ++i) {
    const GenerateOutput::Sequence &d = on_device[i].sequences.at(0), &h = on_host[i].sequences.at(0);
    EXPECT_EQ(d.token_ids, h.token_ids) << "request " << i;
    ASSERT_EQ(d.logprobs.size(), i == 3 ? 0u : d.token_ids.size()) << "request " << i;
    ASSERT_EQ(h.logprobs.size(), d.logprobs.size());
    for (size_t t = 0; t < d.logprobs.size(); ++t) {
      EXPECT_EQ(d.logprobs[t].token, d.token_ids[t]);
      EXPECT_EQ(d.logprobs[t].logprob, h.logprobs[t].logprob) << "request " << i << ", token " << t;
      EXPECT_EQ(d.logprobs[t].top, h.logprobs[t].top) << "request " << i << ", token " << t;
      // The sampled token's rank in its raw row (Ops::token_rank_rows where the logits are):
      // its place in the top list when it is there, 1 for the greedy row.
      EXPECT_EQ(d.logprobs[t].rank, h.logprobs[t].rank) << "request " << i << ", token " << t;
      EXPECT_GE(d.logprobs[t].rank, 1);
      const auto& top = d.logprobs[t].top;
      for (size_t j = 0; j < top.size(); ++j) {
        if (top[j].token == d.token_ids[t]) {
          EXPECT_EQ(d.logprobs[t].rank, static_cast<int32_t>(j) + 1);
        }
      }
      if (i == 1) {
        EXPECT_EQ(d.logprobs[t].rank, 1);
      }
      EXPECT_EQ(d.logprobs[t].top.size(), std::vector<size_t>({3, 20, 0})[i]);
      EXPECT_LT(d.logprobs[t].logprob, 0.0f);
    }
  }
  const auto with_processed = run(false, true, &mixed);
  ASSERT_EQ(with_processed.size(), 4u);
  // The processed row's 8 sampling steps go to the host (the first step, which prefills only the
  // other three prompts within the 64-token budget, may stay on the device).
  EXPECT_LE(mixed.n_device_sampled_steps, 1);
  EXPECT_GE(mixed.n_steps - mixed.n_device_sampled_steps, 8);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(with_processed[i].sequences.at(0).token_ids, on_device[i].sequences.at(0).token_ids);
  }
}

TEST(EngineGenerateTest, BatchOfRequestsAllFinishWithExactLengths) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(ids_request(prompt_ids(5 + 23 * i, 100 + i), 4 + i, 7 + i));
  size_t n_progress = 0;
  auto outs = engine->generate(reqs, [&](size_t done, size_t total) {
    EXPECT_EQ(total, 6u);
    EXPECT_EQ(done, ++n_progress);
  });
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  ASSERT_EQ(outs->size(), 6u);
  EXPECT_EQ(n_progress, 6u);
  for (int i = 0; i < 6; ++i) {
    const GenerateOutput& o = (*outs)[static_cast<size_t>(i)];
    EXPECT_EQ(o.prompt_ids, reqs[static_cast<size_t>(i)].prompt_ids);
    ASSERT_EQ(o.sequences.size(), 1u);
    EXPECT_EQ(o.sequences[0].token_ids.size(), static_cast<size_t>(4 + i));
    EXPECT_EQ(o.sequences[0].finish, FinishReason::kLength);
    for (int32_t t : o.sequences[0].token_ids) EXPECT_TRUE(t >= 0 && t < 512);
    EXPECT_EQ(o.sequences[0].text, engine->tokenizer()->decode(o.sequences[0].token_ids, true));
  }
  const EngineStats st = engine->stats();
  EXPECT_EQ(st.n_requests_finished, 6);
  EXPECT_EQ(st.n_generated_tokens_total, 4 + 5 + 6 + 7 + 8 + 9);
  EXPECT_EQ(st.n_running + st.n_waiting, 0);
  testing::expect_all_free(*engine);
}

TEST(EngineGenerateTest, EventsStreamInOrderAndEndOnce) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  EventLog log;
  Request r = ids_request(prompt_ids(40, 3), 9, 5);
  r.sampling.logprobs = 3;
  auto id = engine->submit(r, log.sink());
  ASSERT_TRUE(id.is_ok());
  ASSERT_TRUE(log.wait(1));
  std::lock_guard<std::mutex> lock(log.mu);
  const auto& evs = log.events[*id];
  ASSERT_FALSE(evs.empty());
  int32_t n = 0;
  for (size_t i = 0; i < evs.size(); ++i) {
    EXPECT_EQ(evs[i].finish.has_value(), i + 1 == evs.size());
    EXPECT_EQ(evs[i].logprobs.size(), evs[i].token_ids.size());
    for (const TokenLogprobs& lp : evs[i].logprobs) {
      EXPECT_EQ(lp.top.size(), 3u);
      EXPECT_LE(lp.logprob, 0.0f);
      EXPECT_GE(lp.top[0].logprob, lp.logprob);
    }
    n += static_cast<int32_t>(evs[i].token_ids.size());
    EXPECT_EQ(evs[i].n_generated_tokens, n);
    EXPECT_EQ(evs[i].n_prompt_tokens, 40);
  }
  EXPECT_EQ(n, 9);
  EXPECT_EQ(*evs.back().finish, FinishReason::kLength);
}

TEST(EngineGenerateTest, SampleZeroOfNEqualsNOneAndSamplesDiffer) {
  auto engine = testing::open_micro();
  ASSERT_NE(engine, nullptr);
  Request one = ids_request(prompt_ids(20, 8), 10, 1234);
  Request four = one;
  four.sampling.n = 4;
  auto outs = engine->generate({one, four});
  ASSERT_TRUE(outs.is_ok());
  ASSERT_EQ((*outs)[1].sequences.size(), 4u);
  EXPECT_EQ((*outs)[1].sequences[0].token_ids, (*outs)[0].sequences[0].token_ids);
  EXPECT_NE((*outs)[1].sequences[1].token_ids, (*outs)[1].sequences[2].token_ids);
  EXPECT_NE((*outs)[1].sequences[0].token_ids, (*outs)[1].sequences[3].token_ids);
  testing::expect_all_free(*engine);
}

// A stop id ends the sequence with the token. The engine had planned the next step before the host
// saw the stop: that step samples nothing, yet counts as sampled where the logits are (no row
// needed the host), and the step counts move together when a step is taken in — so a run whose
// every row the device samples has every step counted (the GPU suite once saw 11 of 12: the step
// count was the scheduler's, and the step past the stop stayed in flight until the next arrival).
TEST(EngineGenerateTest, StopTokenIdEndsTheSequence) {
  // Whenever a step of the stopped run is planned, the counts since its start agree (each of its
  // steps samples, on the device): a step is in none of them until it is taken in.
  Engine* live = nullptr;
  std::atomic<const EngineStats*> since{nullptr};  // set by this thread, read by the engine's
  int64_t disagreements = 0;
  engine::DebugOptions debug;
  debug.on_plan = [&](const sched::BatchPlan&) {
    const EngineStats* base = since.load();
    if (base == nullptr) return;
    const EngineStats st = live->stats();
    disagreements += st.n_device_sampled_steps - base->n_device_sampled_steps != st.n_steps - base->n_steps ? 1 : 0;
  };
  auto engine = testing::open_micro(testing::micro_options(), debug);
  ASSERT_NE(engine, nullptr);
  live = engine.get();
  Request r = ids_request(prompt_ids(25, 4), 20, 99);
  const auto free_run = testing::generate_tokens(*engine, {r})[0];
  ASSERT_EQ(free_run.size(), 20u);
  r.sampling.stop_token_ids = {free_run[5]};
  const size_t first = static_cast<size_t>(std::find(free_run.begin(), free_run.end(), free_run[5]) - free_run.begin());
  const EngineStats before = engine->stats();
  since = &before;
  auto outs = engine->generate({r});
  ASSERT_TRUE(outs.is_ok());
  const auto& s = (*outs)[0].sequences[0];
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_EQ(s.token_ids, std::vector<int32_t>(free_run.begin(), free_run.begin() + static_cast<long>(first) + 1));
  EXPECT_EQ(s.stop_token_id, free_run[5]);  // vLLM's stop_reason: the stop token id
  EXPECT_EQ(s.stop_string, "");
  const EngineStats after = engine->stats();
  EXPECT_GT(after.n_steps_ahead, before.n_steps_ahead);  // the engine planned ahead in this run
  EXPECT_EQ(after.n_device_sampled_steps - before.n_device_sampled_steps, after.n_steps - before.n_steps);
  EXPECT_EQ(disagreements, 0);
}

TEST(EngineGenerateTest, UnseededRequestsAreDeterministicPerEngineRun) {
  std::vector<std::vector<int32_t>> runs;
  for (int run = 0; run < 2; ++run) {
    auto engine = testing::open_micro();
    ASSERT_NE(engine, nullptr);
    runs.push_back(testing::generate_tokens(*engine, {ids_request(prompt_ids(30, 1), 8, std::nullopt)})[0]);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace deepinfer

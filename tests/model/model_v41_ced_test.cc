// CED prefill truncation (model_v41_flash.md §2.3, §13) on tiny-v41: compact mode keeps each
// prompt's last keep_tokens rows for the decoder layers (6..11). With keep >= W + 5(W-1) = 43 the
// last row's logits equal exact prefill bit for bit; with 42 they do not; chunking never changes a
// compact result; rows the decoder dropped cannot ask for logits.
#include <cmath>

#include "model/v41/model_v41.h"
#include "model_v41_test_util.h"

namespace deepinfer {
namespace {

using model::Numerics;
using model::PrefillMode;

// Last-row logits of a prompt run in chunks, then the logits of decode steps fed `decode` (the
// same forced tokens for every model, so the compared sequences never diverge).
std::vector<std::vector<float>> prompt_then_decode(engine::LoadedModel& lm, const std::vector<int32_t>& ids,
                                                   int64_t chunk, const std::vector<int32_t>& decode = {}) {
  auto state = testing::make_v41_state(lm, 1, 16);
  const int32_t n = static_cast<int32_t>(ids.size());
  auto out = testing::run_v41(lm, state, ids, chunk, {n - 1});
  for (size_t i = 0; i < decode.size(); ++i) {
    const int32_t next = decode[i];
    auto b = testing::make_batch({{0, {next}, n + static_cast<int32_t>(i), testing::iota_blocks(0, 16), 0, 0, {0}}});
    b.n_prompt = {n};
    auto r = lm.model->forward(b, state);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    out.push_back(testing::logits_of(*r)[0]);
  }
  return out;
}

TEST(CedPrefillTest, KeepingTheExactBoundReproducesExactPrefill) {
  const auto ids = testing::random_ids(64, 21, 512);
  auto exact = testing::load_v41(Numerics::kPlain);
  ASSERT_NE(exact, nullptr);
  const auto want = prompt_then_decode(*exact, ids, 64);
  // The decoder's receptive field at the last row is W + 5 (W - 1) = 43 rows: keeping them is
  // exact by construction. Shorter tails are approximations (a few rows less can still come out
  // equal when the FP8 window quantizer absorbs the difference).
  auto keep43 = testing::load_v41(Numerics::kPlain, PrefillMode::kCompact, 43);
  ASSERT_NE(keep43, nullptr);
  EXPECT_EQ(prompt_then_decode(*keep43, ids, 64), want);
  for (int keep : {8, 20}) {
    auto lmk = testing::load_v41(Numerics::kPlain, PrefillMode::kCompact, keep);
    ASSERT_NE(lmk, nullptr);
    EXPECT_GT(testing::max_abs_diff(prompt_then_decode(*lmk, ids, 64)[0], want[0]), 1e-3f) << "keep " << keep;
  }
}

TEST(CedPrefillTest, ChunkedCompactPrefillAndDecodeEqualOneShotCompact) {
  auto lm = testing::load_v41(Numerics::kOfficial, PrefillMode::kCompact, 20);
  ASSERT_NE(lm, nullptr);
  const auto ids = testing::random_ids(64, 22, 512);
  const std::vector<int32_t> decode = {17, 300, 41};
  const auto one = prompt_then_decode(*lm, ids, 64, decode);
  for (int64_t chunk : {1, 7, 50}) {  // chunk boundaries before, at and inside the kept tail (44..63)
    EXPECT_EQ(prompt_then_decode(*lm, ids, chunk, decode), one) << "chunk " << chunk;
  }
}

TEST(CedPrefillTest, CompactDiffersFromExactOnlyAsAnApproximation) {
  const auto ids = testing::random_ids(128, 23, 512);
  auto exact = testing::load_v41(Numerics::kOfficial);
  auto compact = testing::load_v41(Numerics::kOfficial, PrefillMode::kCompact, 20);
  ASSERT_TRUE(exact && compact);
  const std::vector<int32_t> decode = {5, 6, 7, 8};
  const auto le = prompt_then_decode(*exact, ids, 128, decode);
  const auto lc = prompt_then_decode(*compact, ids, 128, decode);
  float worst = 0.0f;
  int agree = 0;
  for (size_t i = 0; i < le.size(); ++i) {
    worst = std::max(worst, testing::max_abs_diff(le[i], lc[i]));
    agree += testing::argmax(le[i]) == testing::argmax(lc[i]);
  }
  std::printf("compact (keep 20) vs exact, 128-token prompt + 4 forced decode steps: max |dlogit| %.4g, "
              "top-1 %d/%zu\n", worst, agree, le.size());
  EXPECT_GT(worst, 0.0f);  // an approximation: the decoder windows never saw below the kept tail
  EXPECT_LT(worst, 1.0f);
}

// A snapshot taken inside a prompt whose decoder rows were all skipped holds stale decoder rings;
// a request restoring it must not read them (the slot records where its decoder rings are valid).
TEST(CedPrefillTest, SnapshotRestoreNeverReadsSkippedDecoderRows) {
  auto lm = testing::load_v41(Numerics::kOfficial, PrefillMode::kCompact, 20);
  ASSERT_NE(lm, nullptr);
  const auto a = testing::random_ids(100, 25, 512);  // decoder tail 80..99: nothing below 48 runs it
  std::vector<int32_t> b(a.begin(), a.begin() + 48);
  for (int32_t t : testing::random_ids(16, 26, 512)) b.push_back(t);  // 64 tokens, tail 44..63
  std::vector<std::vector<float>> results;
  for (uint64_t previous_seed : {27, 28}) {  // different leftovers in slot 0's rings
    auto state = testing::make_v41_state(*lm, 3, 16);
    testing::run_v41(*lm, state, testing::random_ids(64, previous_seed, 512), 64, {}, 0, 0);
    state.reset_slot(0);
    auto first = testing::make_batch({{0, {a.begin(), a.begin() + 48}, 0, testing::iota_blocks(0, 7), 0, 0, {}}});
    first.n_prompt = {100};
    ASSERT_TRUE(lm->model->forward(first, state).is_ok());
    state.copy_slot(0, 2);  // snapshot at position 48
    state.copy_slot(2, 1);  // restored for b, which shares blocks 0..2 and owns 8..
    std::vector<int32_t> table = {0, 1, 2, 8};
    auto rest = testing::make_batch({{1, {b.begin() + 48, b.end()}, 48, table, 48, 0, {15}}});
    rest.n_prompt = {64};
    auto r = lm->model->forward(rest, state);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    results.push_back(testing::logits_of(*r)[0]);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(CedPrefillTest, LogitsOfADroppedRowAreAnError) {
  auto lm = testing::load_v41(Numerics::kPlain, PrefillMode::kCompact, 10);
  ASSERT_NE(lm, nullptr);
  auto state = testing::make_v41_state(*lm, 1, 4);
  const auto ids = testing::random_ids(30, 24, 512);
  auto b = testing::make_batch({{0, ids, 0, testing::iota_blocks(0, 4), 0, 0, {5, 29}}});
  b.n_prompt = {30};
  auto r = lm->model->forward(b, state);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("kept decoder tail"), std::string::npos) << r.status().message();
  EXPECT_EQ(static_cast<model::ModelV41*>(lm->model.get())->decoder_begin(30), 20);
}

}  // namespace
}  // namespace deepinfer

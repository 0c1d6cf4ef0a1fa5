// ReasoningGatedMatcher and the after_reasoning checks of accept_request, without a model: a
// recording inner matcher shows that reasoning tokens never reach the grammar, the mask while
// reasoning is all ones but EOS (and no bit past the vocabulary), and `</think>` hands over to
// the grammar; a tokenizer without a `</think>` special is an INVALID_ARGUMENT naming the field.
#include <gtest/gtest.h>

#include <map>

#include "engine/reasoning_gate.h"
#include "engine/request_intake.h"
#include "sample/logits_processors.h"

namespace deepinfer::engine {
namespace {

constexpr int32_t kThinkEnd = 40;
constexpr int32_t kEos = 1;
constexpr int32_t kVocab = 70;  // not a multiple of 32: the last word has bits past the vocabulary

// Allows only token 5 until it has seen `n_until_done` tokens, then only EOS.
class RecordingMatcher final : public StructuredOutputMatcher {
 public:
  explicit RecordingMatcher(std::vector<int32_t>* seen) : seen_(seen) {}
  Status fill_bitmask(std::span<uint32_t> words) override {
    std::fill(words.begin(), words.end(), 0u);
    const int32_t allowed = is_terminated() ? kEos : 5;
    words[allowed >> 5] |= 1u << (allowed & 31);
    return Status::ok();
  }
  bool accept(int32_t token) override {
    seen_->push_back(token);
    return token == 5 || (token == kEos && seen_->size() > 1);
  }
  bool is_terminated() const override { return !seen_->empty(); }
  Status rollback(int32_t n) override {
    rolled_back += n;
    return Status::ok();
  }
  int32_t rolled_back = 0;

 private:
  std::vector<int32_t>* seen_;
};

std::vector<int32_t> allowed_tokens(std::span<const uint32_t> words) {
  std::vector<int32_t> out;
  for (int32_t t = 0; t < static_cast<int32_t>(words.size()) * 32; ++t) {
    if (sample::bitmask_allows(words, t)) out.push_back(t);
  }
  return out;
}

TEST(ReasoningGateTest, ReasoningIsFreeButEosAndTheGrammarStartsAfterThinkEnd) {
  std::vector<int32_t> seen;
  ReasoningGatedMatcher gate(std::make_unique<RecordingMatcher>(&seen), kThinkEnd, {kEos}, kVocab);
  std::vector<uint32_t> words(static_cast<size_t>(sample::bitmask_words(kVocab)), 0u);
  ASSERT_TRUE(gate.fill_bitmask(words).is_ok());
  std::vector<int32_t> expected;
  for (int32_t t = 0; t < kVocab; ++t) {
    if (t != kEos) expected.push_back(t);
  }
  EXPECT_EQ(allowed_tokens(words), expected);

  EXPECT_TRUE(gate.accept(7));
  EXPECT_TRUE(gate.accept(5));
  EXPECT_FALSE(gate.accept(kEos));  // the answer cannot be skipped
  EXPECT_FALSE(gate.is_terminated());
  EXPECT_FALSE(gate.answering());
  EXPECT_TRUE(seen.empty());  // reasoning tokens never reach the grammar

  EXPECT_TRUE(gate.accept(kThinkEnd));
  EXPECT_TRUE(gate.answering());
  EXPECT_TRUE(seen.empty());  // nor does </think> itself
  ASSERT_TRUE(gate.fill_bitmask(words).is_ok());
  EXPECT_EQ(allowed_tokens(words), std::vector<int32_t>{5});  // now the grammar's mask

  EXPECT_TRUE(gate.accept(5));
  EXPECT_TRUE(gate.is_terminated());
  EXPECT_FALSE(gate.accept(kThinkEnd));  // a second </think> goes to the grammar, which refuses it
  EXPECT_EQ(seen, (std::vector<int32_t>{5, kThinkEnd}));
}

// Speculative decoding checks drafts and takes them back: a rollback across `</think>` returns
// to free reasoning and hands the inner matcher back only the tokens it saw.
TEST(ReasoningGateTest, RollbackUndoesAcrossThinkEnd) {
  std::vector<int32_t> seen;
  auto inner = std::make_unique<RecordingMatcher>(&seen);
  RecordingMatcher* recording = inner.get();
  ReasoningGatedMatcher gate(std::move(inner), kThinkEnd, {kEos}, kVocab);
  EXPECT_TRUE(gate.accept(7));
  EXPECT_TRUE(gate.accept(kThinkEnd));
  EXPECT_TRUE(gate.accept(5));
  EXPECT_FALSE(gate.accept(9));  // refused by the grammar: not counted
  EXPECT_TRUE(gate.answering());
  ASSERT_TRUE(gate.rollback(1).is_ok());
  EXPECT_EQ(recording->rolled_back, 1);
  EXPECT_TRUE(gate.answering());
  ASSERT_TRUE(gate.rollback(1).is_ok());  // the `</think>` itself
  EXPECT_FALSE(gate.answering());
  EXPECT_EQ(recording->rolled_back, 1);
  EXPECT_FALSE(gate.rollback(2).is_ok());  // only one token left
  ASSERT_TRUE(gate.rollback(1).is_ok());
  EXPECT_TRUE(gate.accept(kThinkEnd));
  EXPECT_TRUE(gate.answering());
}

TEST(ReasoningGateTest, InnerTerminationDoesNotEndTheReasoning) {
  std::vector<int32_t> seen = {5};  // the inner matcher reports terminated from the start
  ReasoningGatedMatcher gate(std::make_unique<RecordingMatcher>(&seen), kThinkEnd, {kEos, 3}, kVocab);
  EXPECT_FALSE(gate.is_terminated());
  std::vector<uint32_t> words(static_cast<size_t>(sample::bitmask_words(kVocab)), 0u);
  ASSERT_TRUE(gate.fill_bitmask(words).is_ok());
  EXPECT_FALSE(sample::bitmask_allows(words, 3));  // every EOS id is masked
  EXPECT_FALSE(gate.accept(3));
  EXPECT_TRUE(gate.accept(kThinkEnd));
  EXPECT_TRUE(gate.is_terminated());
}

// Enough of a Tokenizer for the intake: `</think>` is special, plain, or absent.
class StubTokenizer final : public Tokenizer {
 public:
  enum class ThinkEnd { kSpecial, kPlain, kAbsent };
  explicit StubTokenizer(ThinkEnd think_end) : think_end_(think_end) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const int32_t>, bool) const override { return ""; }
  int32_t n_vocab() const override { return kVocab; }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    if (token == "</think>" && think_end_ != ThinkEnd::kAbsent) return kThinkEnd;
    return std::nullopt;
  }
  std::string token_bytes(int32_t) const override { return ""; }
  bool is_special(int32_t id) const override { return id == kThinkEnd && think_end_ == ThinkEnd::kSpecial; }
  int32_t bos_id() const override { return 0; }
  int32_t eos_id() const override { return kEos; }

 private:
  ThinkEnd think_end_;
};

// Compiles anything (the grammar itself is not under test here).
class StubCompiler final : public StructuredOutputCompiler {
 public:
  Result<std::shared_ptr<const CompiledStructuredOutput>> compile(const StructuredOutput&) const override {
    return std::shared_ptr<const CompiledStructuredOutput>(std::make_shared<CompiledStructuredOutput>());
  }
  std::unique_ptr<StructuredOutputMatcher> make_matcher(
      const std::shared_ptr<const CompiledStructuredOutput>&) const override {
    return nullptr;
  }
};

Result<AcceptedRequest> accept(StubTokenizer::ThinkEnd think_end, StructuredOutput::Kind kind, bool after) {
  Request r;
  r.prompt_ids = {2, 3, 4};
  r.sampling.max_tokens = 8;
  r.structured_output = StructuredOutput{kind, "{}", after};
  StubCompiler compiler;
  return accept_request(std::move(r), 1, [](const TokenEvent&) {}, StubTokenizer(think_end),
                        IntakeLimits{kVocab, 64, 0}, &compiler);
}

TEST(ReasoningGateTest, IntakeResolvesThinkEndOrNamesTheField) {
  using Kind = StructuredOutput::Kind;
  using TE = StubTokenizer::ThinkEnd;
  auto ok = accept(TE::kSpecial, Kind::kJsonSchema, true);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->reasoning_end, kThinkEnd);
  auto off = accept(TE::kSpecial, Kind::kJsonSchema, false);
  ASSERT_TRUE(off.is_ok()) << off.status().to_string();
  EXPECT_EQ(off->reasoning_end, -1);
  // Without after_reasoning the tokenizer's </think> does not matter.
  EXPECT_TRUE(accept(TE::kAbsent, Kind::kJsonObject, false).is_ok());

  for (TE te : {TE::kAbsent, TE::kPlain}) {
    auto bad = accept(te, Kind::kJsonObject, true);
    ASSERT_FALSE(bad.is_ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(),
              "structured_output.after_reasoning: the tokenizer has no </think> special token that could end "
              "the reasoning");
  }
  auto dsml = accept(TE::kSpecial, Kind::kDsmlToolCalls, true);
  ASSERT_FALSE(dsml.is_ok());
  EXPECT_EQ(dsml.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dsml.status().message(),
            "structured_output.after_reasoning: not used with DSML tool calls (set \"thinking\" in their spec "
            "instead)");
}

}  // namespace
}  // namespace deepinfer::engine

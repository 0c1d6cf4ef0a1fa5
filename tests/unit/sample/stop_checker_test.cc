// StopChecker: token stops, EOS, min/max tokens, and stop strings with hold-back across token
// boundaries and multi-byte characters. The key property: released text and finish state do
// not depend on how the text is split into tokens.
#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer::sample {
namespace {

constexpr int32_t kEos = 2;
constexpr int32_t kText = 10;  // any ordinary token id

struct StopRun {
  std::string text;  // everything released
  FinishReason finish = FinishReason::kNone;
  int32_t stop_token = -1;
  int32_t stop_string_index = -1;
  std::vector<std::string> deltas;  // per append
};

// Feeds (token, delta) pairs until finished; unfinished runs are flushed at the end.
StopRun feed(const SamplingParams& p, const std::vector<std::pair<int32_t, std::string>>& steps,
         int32_t cap = 1 << 20) {
  const std::vector<int32_t> eos = {kEos};
  StopChecker checker(p, eos, cap);
  StopRun run;
  for (const auto& [token, delta] : steps) {
    StopUpdate u = checker.append(token, delta);
    run.text += u.text;
    run.deltas.push_back(u.text);
    if (u.finish != FinishReason::kNone) {
      run.finish = u.finish, run.stop_token = u.stop_token;
      run.stop_string_index = u.stop_string_index;
      EXPECT_TRUE(checker.finished());
      EXPECT_EQ(checker.n_held(), 0u);
      return run;
    }
  }
  run.text += checker.flush();
  return run;
}

std::vector<std::pair<int32_t, std::string>> text_tokens(std::initializer_list<std::string> parts) {
  std::vector<std::pair<int32_t, std::string>> steps;
  for (const auto& part : parts) steps.emplace_back(kText, part);
  return steps;
}

TEST(StopCheckerTest, EosStopsAndItsTextIsDropped) {
  SamplingParams p;
  StopRun r = feed(p, {{kText, "Hi"}, {kEos, "</s>"}, {kText, "never"}});
  EXPECT_EQ(r.text, "Hi");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_token, kEos);
  p.include_stop_str_in_output = true;
  EXPECT_EQ(feed(p, {{kText, "Hi"}, {kEos, "</s>"}}).text, "Hi</s>");
}

TEST(StopCheckerTest, IgnoreEosKeepsGoingButStopTokenIdsStillStop) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {7};
  StopRun r = feed(p, {{kText, "a"}, {kEos, "<eos>"}, {kText, "b"}, {7, "<x>"}, {kText, "c"}});
  EXPECT_EQ(r.text, "a<eos>b");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_token, 7);
}

TEST(StopCheckerTest, MaxTokensAndEngineCapGiveLength) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"xyz"};
  StopRun r = feed(p, text_tokens({"a", "b", "xy", "z"}));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.text, "abxy");  // the held-back "xy" is released at the end
  EXPECT_EQ(r.deltas, (std::vector<std::string>{"a", "b", "xy"}));
  p.max_tokens.reset();
  StopRun capped = feed(p, text_tokens({"a", "b", "c"}), /*cap=*/2);
  EXPECT_EQ(capped.finish, FinishReason::kLength);
  EXPECT_EQ(capped.text, "ab");
}

TEST(StopCheckerTest, StopStringHeldBackAcrossTokens) {
  SamplingParams p;
  p.stop = {"###"};
  StopRun r = feed(p, text_tokens({"a#", "#", "#b"}));
  EXPECT_EQ(r.deltas, (std::vector<std::string>{"a", "", ""}));
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_string_index, 0);
  p.include_stop_str_in_output = true;
  EXPECT_EQ(feed(p, text_tokens({"a#", "#", "#b"})).text, "a###");
  // A false alarm releases the held text once it cannot match any more.
  p.include_stop_str_in_output = false;
  StopRun miss = feed(p, text_tokens({"a#", "#", "c"}));
  EXPECT_EQ(miss.deltas, (std::vector<std::string>{"a", "", "##c"}));
  EXPECT_EQ(miss.finish, FinishReason::kNone);
}

TEST(StopCheckerTest, OverlappingPrefixesReleaseOnlyWhatCannotMatch) {
  SamplingParams p;
  p.stop = {"aab"};
  StopRun r = feed(p, text_tokens({"a", "a", "a", "b"}));
  EXPECT_EQ(r.deltas, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, EarliestCompletingStopStringWins) {
  SamplingParams p;
  p.stop = {"abcd", "bc"};
  StopRun r = feed(p, text_tokens({"xabcd"}));
  EXPECT_EQ(r.text, "xa");
  EXPECT_EQ(r.stop_string_index, 1);
  // Same end: the longer (earlier-starting) string wins.
  p.stop = {"c", "abc"};
  r = feed(p, text_tokens({"xabc"}));
  EXPECT_EQ(r.text, "x");
  EXPECT_EQ(r.stop_string_index, 1);
}

TEST(StopCheckerTest, StopStringsIgnoredUntilMinTokens) {
  SamplingParams p;
  p.stop = {"."};
  p.min_tokens = 2;
  StopRun r = feed(p, text_tokens({"a.", "b.", "c.", "d"}));
  EXPECT_EQ(r.text, "a.b.c");  // tokens 1 and 2 may not stop; token 3 does
  EXPECT_EQ(r.finish, FinishReason::kStop);
}

TEST(StopCheckerTest, MultiByteStopStringSplitAcrossTokens) {
  SamplingParams p;
  p.stop = {"。", "🛑"};  // E3 80 82 and F0 9F 9B 91
  StopRun r = feed(p, text_tokens({"你好", "\xE3", "\x80", "\x82", "more"}));
  EXPECT_EQ(r.deltas, (std::vector<std::string>{"你好", "", "", ""}));
  EXPECT_EQ(r.text, "你好");
  EXPECT_EQ(r.stop_string_index, 0);
  StopRun emoji = feed(p, text_tokens({"ok\xF0\x9F", "\x9B\x91!"}));
  EXPECT_EQ(emoji.text, "ok");
  EXPECT_EQ(emoji.stop_string_index, 1);
}

TEST(StopCheckerTest, IncompleteUtf8IsHeldEvenWithoutStopStrings) {
  SamplingParams p;
  // "é" = C3 A9 and "€" = E2 82 AC arriving byte by byte.
  StopRun r = feed(p, text_tokens({"x\xC3", "\xA9\xE2", "\x82", "\xAC", "y"}));
  EXPECT_EQ(r.deltas, (std::vector<std::string>{"x", "é", "", "€", "y"}));
  EXPECT_EQ(incomplete_utf8_suffix("ab"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xF0\x9F\x9B"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xF0\x9F\x9B\x91"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("\x80\x80"), 0u);
}

TEST(StopCheckerTest, ResultDoesNotDependOnTokenBoundaries) {
  SamplingParams p;
  p.stop = {"STOP", "é!", "aaab", "\n\n"};
  const std::string texts[] = {"hello aaaab world", "xx é é! tail", "no stop here, aaa",
                               "line\nline\n\nrest", "ST ST STOPPED", "ééé"};
  std::mt19937_64 rng(3);
  for (const std::string& text : texts) {
    const StopRun whole = feed(p, text_tokens({text}));
    for (int split = 0; split < 200; ++split) {
      std::vector<std::pair<int32_t, std::string>> steps;
      for (size_t i = 0; i < text.size();) {
        const size_t n = 1 + rng() % 4;  // may cut through multi-byte characters
        steps.emplace_back(kText, text.substr(i, n));
        i += n;
      }
      const StopRun r = feed(p, steps);
      ASSERT_EQ(r.text, whole.text) << text;
      ASSERT_EQ(r.finish, whole.finish) << text;
      ASSERT_EQ(r.stop_string_index, whole.stop_string_index) << text;
    }
  }
  EXPECT_EQ(feed(p, text_tokens({texts[0]})).text, "hello a");
  EXPECT_EQ(feed(p, text_tokens({texts[1]})).text, "xx é ");
  EXPECT_EQ(feed(p, text_tokens({texts[2]})).finish, FinishReason::kNone);
  EXPECT_EQ(feed(p, text_tokens({texts[3]})).text, "line\nline");
  EXPECT_EQ(feed(p, text_tokens({texts[4]})).text, "ST ST ");
}

TEST(StopCheckerTest, FlushReleasesHeldText) {
  SamplingParams p;
  p.stop = {"END"};
  const std::vector<int32_t> eos = {kEos};
  StopChecker checker(p, eos, 100);
  EXPECT_EQ(checker.append(kText, "the EN").text, "the ");
  EXPECT_EQ(checker.n_held(), 2u);
  EXPECT_EQ(checker.flush(), "EN");
  EXPECT_EQ(checker.n_generated(), 1);
  EXPECT_FALSE(checker.finished());
}

}  // namespace
}  // namespace deepinfer::sample

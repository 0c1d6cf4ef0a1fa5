// OutputParser: generated ids -> events. Model outputs are written as text with the special
// tokens spelled, turned into ids by the fake tokenizer (specials matched), then fed one id at a
// time. Covers reasoning/content split, DSML tool calls with exact OpenAI argument strings,
// hold-back of a possible opener, markers recognised by id only, malformed markup, truncation.
#include <gtest/gtest.h>

#include <memory>

#include "deepinfer/chat.h"
#include "fake_tokenizer.h"
#include "tokenizer/chat/utf8.h"

namespace deepinfer::chat {
namespace {

using testing::FakeTokenizer;

const std::string kEos = "<｜end▁of▁sentence｜>";

// Everything the events said, concatenated per stream.
struct Collected {
  std::string reasoning, content, error;
  std::vector<std::string> names, ids, arguments, end_arguments;
  std::optional<FinishReason> finish;
  std::vector<ChatEvent> events;
};

Collected collect(const std::vector<ChatEvent>& events) {
  Collected c;
  c.events = events;
  for (const ChatEvent& e : events) {
    switch (e.kind) {
      case EventKind::kReasoningDelta: c.reasoning += e.text; break;
      case EventKind::kContentDelta: c.content += e.text; break;
      case EventKind::kToolCallStart:
        EXPECT_EQ(e.tool_index, static_cast<int>(c.names.size()));
        c.names.push_back(e.tool_name);
        c.ids.push_back(e.tool_call_id);
        c.arguments.emplace_back();
        break;
      case EventKind::kToolCallArgumentsDelta:
        EXPECT_EQ(e.tool_index + 1, static_cast<int>(c.arguments.size()));
        c.arguments.back() += e.text;
        break;
      case EventKind::kToolCallEnd: c.end_arguments.push_back(e.text); break;
      case EventKind::kError: c.error = e.text; break;
      case EventKind::kFinish:
        EXPECT_FALSE(c.finish.has_value()) << "two finish events";
        c.finish = e.finish_reason;
        break;
    }
  }
  return c;
}

class ChatParserTest : public ::testing::Test {
 protected:
  // Multi-byte pieces, so markup and text share tokens as they do with the real BPE.
  std::shared_ptr<FakeTokenizer> tok_ = std::make_shared<FakeTokenizer>(
      std::vector<std::string>{"\n\n<", ">\n<", ">\n</", "</", "name=\"", "tool_calls",
                               " string=\"", "ing"});

  OutputParser make(ThinkingMode mode, ModelFamily family = ModelFamily::kV4) {
    ParserOptions o;
    o.family = family;
    o.thinking_mode = mode;
    auto p = OutputParser::create(tok_, o);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    return std::move(p).value();
  }

  // Feeds `ids` one at a time, then finish(length) when `finish_length`.
  Collected run(OutputParser& p, const std::vector<int32_t>& ids, bool finish_length = false) {
    std::vector<ChatEvent> events;
    for (int32_t id : ids) p.push(id, &events);
    if (finish_length) p.finish(FinishReason::kLength, &events);
    return collect(events);
  }
  Collected run_text(ThinkingMode mode, const std::string& output, bool finish_length = false) {
    OutputParser p = make(mode);
    return run(p, tok_->ids(output), finish_length);
  }
};

TEST_F(ChatParserTest, ChatContentOnly) {
  Collected c = run_text(ThinkingMode::kChat, "Hello, world!" + kEos);
  EXPECT_EQ(c.content, "Hello, world!");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.finish, FinishReason::kStop);
  EXPECT_EQ(c.events.back().kind, EventKind::kFinish);
}

TEST_F(ChatParserTest, ThinkingSplitsReasoningAndContent) {
  OutputParser p = make(ThinkingMode::kThinking);
  Collected c = run(p, tok_->ids("Let me think.</think>The answer is 4." + kEos));
  EXPECT_EQ(c.reasoning, "Let me think.");
  EXPECT_EQ(c.content, "The answer is 4.");
  EXPECT_EQ(c.finish, FinishReason::kStop);
  EXPECT_EQ(p.output().n_tokens, 13 + 1 + 16 + 1);
  EXPECT_EQ(p.output().n_reasoning_tokens, 13 + 1);  // the reasoning bytes plus </think>
  Message m = p.to_message();
  EXPECT_EQ(m.role, Role::kAssistant);
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  EXPECT_EQ(m.content, "The answer is 4.");
}

// The first assistant turn of the official test 1.
const std::string kWeatherCall =
    "The user wants to know the weather in Beijing. I should use the get_weather tool.</think>\n\n"
    "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
    "name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n<｜DSML｜parameter name=\"unit\" "
    "string=\"true\">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;

TEST_F(ChatParserTest, OfficialToolCall) {
  OutputParser p = make(ThinkingMode::kThinking);
  Collected c = run(p, tok_->ids(kWeatherCall));
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.reasoning,
            "The user wants to know the weather in Beijing. I should use the get_weather tool.");
  EXPECT_EQ(c.content, "");
  for (const ChatEvent& e : c.events) EXPECT_NE(e.kind, EventKind::kContentDelta);
  ASSERT_EQ(c.names, std::vector<std::string>{"get_weather"});
  EXPECT_EQ(c.ids, std::vector<std::string>{"call_0"});
  const std::string args = R"({"location": "Beijing", "unit": "celsius"})";
  EXPECT_EQ(c.arguments, std::vector<std::string>{args});
  EXPECT_EQ(c.end_arguments, std::vector<std::string>{args});
  EXPECT_EQ(c.finish, FinishReason::kToolCalls);
  ASSERT_EQ(p.output().tool_calls.size(), 1u);
  EXPECT_EQ(p.output().tool_calls[0].arguments, args);
  EXPECT_EQ(p.output().finish_reason, FinishReason::kToolCalls);
}

TEST_F(ChatParserTest, ContentBeforeToolCallsNeverStreamsMarkup) {
  std::string out =
      "Checking now.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
      "name=\"n\" string=\"false\">[1, {\"a\": 2.50}]</｜DSML｜parameter>\n<｜DSML｜parameter "
      "name=\"s\" string=\"true\">line1\n\"q\" \\ 東京</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"g\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;
  Collected c = run_text(ThinkingMode::kChat, out);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.content, "Checking now.");
  for (const ChatEvent& e : c.events) {
    if (e.kind == EventKind::kContentDelta) {
      EXPECT_EQ(e.text.find_first_of("\n<"), std::string::npos) << e.text;
    }
  }
  EXPECT_EQ(c.names, (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(c.ids, (std::vector<std::string>{"call_0", "call_1"}));
  // Non-string values verbatim, strings JSON-quoted (Python escaping, non-ASCII kept).
  EXPECT_EQ(c.arguments[0], "{\"n\": [1, {\"a\": 2.50}], \"s\": \"line1\\n\\\"q\\\" \\\\ 東京\"}");
  EXPECT_EQ(c.arguments[1], "{}");
  EXPECT_EQ(c.finish, FinishReason::kToolCalls);
}

TEST_F(ChatParserTest, HeldBackTextIsReleasedWhenItIsNotMarkup) {
  Collected c = run_text(ThinkingMode::kChat, "a\n\nb < c\n<d\n\n" + kEos);
  EXPECT_EQ(c.content, "a\n\nb < c\n<d\n\n");
  EXPECT_EQ(c.finish, FinishReason::kStop);
  Collected len = run_text(ThinkingMode::kChat, "x\n\n<", /*finish_length=*/true);
  EXPECT_EQ(len.content, "x\n\n<");
  EXPECT_EQ(len.finish, FinishReason::kLength);
}

TEST_F(ChatParserTest, SpelledMarkersAreOrdinaryText) {
  // The same characters as </think>, ｜DSML｜ and EOS, but as byte tokens (not control ids).
  std::vector<int32_t> ids = tok_->encode("a</think>b\n\n<｜DSML｜tool_calls>c<｜end▁of▁sentence｜>",
                                          /*match_special=*/false);
  ids.push_back(1);  // the real EOS
  OutputParser p = make(ThinkingMode::kThinking);
  Collected c = run(p, ids);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.reasoning, "a</think>b\n\n<｜DSML｜tool_calls>c<｜end▁of▁sentence｜>");
  EXPECT_EQ(c.content, "");
  EXPECT_TRUE(c.names.empty());
}

// As the official parser (model_v4_flash.md §6.5): BOS, <think>, </think> and ｜DSML｜ out of place
// are errors, never content; any other control token is kept as its text.
TEST_F(ChatParserTest, ControlTokensInOutputAreErrorsNotContent) {
  Collected user = run_text(ThinkingMode::kChat, "hi<｜User｜>fake turn" + kEos);
  EXPECT_EQ(user.error, "");
  EXPECT_EQ(user.content, "hi<｜User｜>fake turn");
  EXPECT_EQ(user.finish, FinishReason::kStop);
  Collected in_reasoning_role = run_text(ThinkingMode::kThinking, "r<｜Assistant｜>s</think>c" + kEos);
  EXPECT_EQ(in_reasoning_role.error, "");
  EXPECT_EQ(in_reasoning_role.reasoning, "r<｜Assistant｜>s");
  EXPECT_EQ(in_reasoning_role.content, "c");
  Collected bos = run_text(ThinkingMode::kChat, "hi<｜begin▁of▁sentence｜>x" + kEos);
  EXPECT_EQ(bos.error, "unexpected control token <｜begin▁of▁sentence｜> in the output");
  EXPECT_EQ(bos.content, "hi");
  EXPECT_EQ(bos.finish, FinishReason::kError);
  Collected think_start = run_text(ThinkingMode::kThinking, "r<think>x" + kEos);
  EXPECT_EQ(think_start.error, "unexpected control token <think> in the output");
  EXPECT_EQ(think_start.reasoning, "r");
  Collected think = run_text(ThinkingMode::kChat, "a</think>b" + kEos);
  EXPECT_EQ(think.error, "</think> outside the reasoning");
  Collected dsml = run_text(ThinkingMode::kChat, "a｜DSML｜b" + kEos);
  EXPECT_EQ(dsml.error, "tool-call markup in the middle of the content");
  EXPECT_EQ(dsml.content, "a");
  Collected in_reasoning = run_text(ThinkingMode::kThinking, "r\n\n<｜DSML｜tool_calls>");
  EXPECT_EQ(in_reasoning.error, "tool-call markup inside the reasoning (before </think>)");
}

TEST_F(ChatParserTest, MalformedDsmlIsAnErrorAndNeverContent) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\n\n<｜DSML｜tool_call>\n", "malformed DSML tool call markup after tool call 0"},
      {"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invok name=\"f\">\n",
       "malformed DSML tool call markup after tool call 0"},
      {"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
       "string=\"maybe\">1</｜DSML｜parameter>",
       "malformed DSML tool call markup after tool call 0"},
      {"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
       "string=\"true\">1</｜DSML｜parameter>\n<｜DSML｜parameter name=\"a\" string=\"true\">2",
       "tool call f: duplicate parameter \"a\""},
      {"\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>trailing" + kEos,
       "malformed DSML tool call markup after tool call 0"},
      {"\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>" + kEos,
       "tool-call block ended before its closing tag"},
  };
  for (const auto& [output, error] : cases) {
    Collected c = run_text(ThinkingMode::kChat, "ok" + output);
    EXPECT_EQ(c.error, error) << output;
    EXPECT_EQ(c.finish, FinishReason::kError) << output;
    EXPECT_EQ(c.content, "ok") << output;
  }
}

// A string="false" value goes into the arguments verbatim, as the reference parser inserts it,
// JSON or not (the turn is not failed over it).
TEST_F(ChatParserTest, NonStringParameterValuesAreVerbatim) {
  Collected c = run_text(ThinkingMode::kChat,
                         "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
                         "string=\"false\">not json</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" "
                         "string=\"false\">[1, 2]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.finish, FinishReason::kToolCalls);
  EXPECT_EQ(c.end_arguments, std::vector<std::string>{"{\"a\": not json, \"b\": [1, 2]}"});
}

TEST_F(ChatParserTest, EmptyToolCallBlockIsAccepted) {
  Collected c = run_text(ThinkingMode::kChat, "\n\n<｜DSML｜tool_calls>\n</｜DSML｜tool_calls>" + kEos);
  EXPECT_EQ(c.error, "");
  EXPECT_TRUE(c.names.empty());
  EXPECT_EQ(c.finish, FinishReason::kToolCalls);
}

// A closed block ended by something other than EOS (a stop id, the length limit right after
// it) holds complete calls (the official parser needs no EOS after it).
TEST_F(ChatParserTest, ClosedToolCallBlockWithoutEos) {
  const std::string block = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
                            "name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  auto ended_by = [&](const std::string& output, FinishReason reason) {
    OutputParser p = make(ThinkingMode::kChat);
    std::vector<ChatEvent> events;
    for (int32_t id : tok_->ids(output)) p.push(id, &events);
    p.finish(reason, &events);
    return collect(events);
  };
  for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength}) {
    Collected c = ended_by("ok" + block, reason);
    EXPECT_EQ(c.error, "");
    EXPECT_EQ(c.finish, FinishReason::kToolCalls);
    EXPECT_EQ(c.names, std::vector<std::string>{"f"});
    EXPECT_EQ(c.content, "ok");
  }
  Collected open = ended_by("ok" + block.substr(0, block.size() - 4), FinishReason::kStop);
  EXPECT_EQ(open.error, "tool-call block cut off before its end");
  EXPECT_EQ(open.finish, FinishReason::kError);
}

TEST_F(ChatParserTest, LengthLimitInsideToolCall) {
  Collected c = run_text(ThinkingMode::kChat,
                         "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter "
                         "name=\"a\" string=\"true\">par",
                         /*finish_length=*/true);
  EXPECT_EQ(c.error, "tool-call block cut off before its end");
  EXPECT_EQ(c.finish, FinishReason::kLength);
  EXPECT_EQ(c.arguments, std::vector<std::string>{"{\"a\": \"par"});
  EXPECT_TRUE(c.end_arguments.empty());
}

TEST_F(ChatParserTest, EosInsideReasoningKeepsTheReasoning) {
  Collected c = run_text(ThinkingMode::kThinking, "still thinking" + kEos);
  EXPECT_EQ(c.reasoning, "still thinking");
  EXPECT_EQ(c.finish, FinishReason::kStop);
  EXPECT_EQ(c.error, "");
}

TEST_F(ChatParserTest, SplitUtf8IsNeverEmittedHalfway) {
  // Byte tokens split each CJK character over three ids.
  std::vector<int32_t> ids = tok_->encode("東京\n\n<", false);
  ids.push_back(128825);
  for (int32_t id : tok_->encode("tool_calls>\n<", false)) ids.push_back(id);
  ids.push_back(128825);
  for (int32_t id : tok_->encode("invoke name=\"天気\">\n<", false)) ids.push_back(id);
  ids.push_back(128825);
  for (int32_t id : tok_->encode("parameter name=\"都市\" string=\"true\">大阪\"</", false)) {
    ids.push_back(id);
  }
  ids.push_back(128825);
  for (int32_t id : tok_->encode("parameter>\n</", false)) ids.push_back(id);
  ids.push_back(128825);
  for (int32_t id : tok_->encode("invoke>\n</", false)) ids.push_back(id);
  ids.push_back(128825);
  for (int32_t id : tok_->encode("tool_calls>", false)) ids.push_back(id);
  ids.push_back(1);
  OutputParser p = make(ThinkingMode::kChat);
  Collected c = run(p, ids);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.content, "東京");
  EXPECT_EQ(c.names, std::vector<std::string>{"天気"});
  EXPECT_EQ(c.arguments, std::vector<std::string>{"{\"都市\": \"大阪\\\"\"}"});
  for (const ChatEvent& e : c.events) {
    // No delta may split a multi-byte character.
    EXPECT_EQ(utf8_complete_prefix(e.text), e.text.size());
    EXPECT_EQ(utf8_sanitize(e.text), e.text);
  }
}

// Ill-formed bytes split across tokens: the assembler's streamed text equals the one-shot
// replacement (one U+FFFD per maximal subpart, as Tokenizer::decode()), whatever the split.
// Regression: it used to replace byte by byte, so a reasoning stream could carry two U+FFFD where
// the decoded tokens had one.
TEST(ChatUtf8Test, StreamingReplacementEqualsOneShotForEverySplit) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_sanitize("stalled \xE6\x97 Berl"), "stalled " + fffd + " Berl");  // E6 97: one subpart
  EXPECT_EQ(utf8_sanitize("\xC3\x28"), fffd + "(");
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate: no valid prefix
  EXPECT_EQ(utf8_sanitize("\xF0\x9F\x98"), fffd);                // cut-off emoji
  for (const std::string whole : {"stalled \xE6\x97 Berl", "\xE6\x97\xE6\x97\xA5!", "a\xF0\x9F\x98\x80\xF0\x9Fz",
                                   "\xC3\x28\xE2\x82\xAC\x80", "\xED\xA0\x80x\xF4\x90\x80\x80"}) {
    const std::string want = utf8_sanitize(whole);
    for (size_t cut = 0; cut <= whole.size(); ++cut) {
      Utf8Assembler a;
      std::string got = a.push(whole.substr(0, cut));
      got += a.push(whole.substr(cut));
      got += a.flush();
      EXPECT_EQ(got, want) << "cut " << cut;
      EXPECT_EQ(utf8_complete_prefix(got), got.size());
    }
    Utf8Assembler bytewise;
    std::string got;
    for (char ch : whole) got += bytewise.push(std::string(1, ch));
    got += bytewise.flush();
    EXPECT_EQ(got, want);
  }
}

TEST_F(ChatParserTest, V41TagNames) {
  OutputParser p = make(ThinkingMode::kThinking, ModelFamily::kV41);
  Collected c = run(p, tok_->ids("r</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n"
                                 "<｜DSML｜ parameter name=\"k\" string=\"false\">true</｜DSML｜ "
                                 "parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>" + kEos));
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.arguments, std::vector<std::string>{"{\"k\": true}"});
  // V4 tag names do not parse as V4.1.
  OutputParser v41 = make(ThinkingMode::kChat, ModelFamily::kV41);
  EXPECT_EQ(run(v41, tok_->ids("\n\n<｜DSML｜tool_calls>\n")).error,
            "malformed DSML tool call markup after tool call 0");
}

TEST_F(ChatParserTest, ToolCallIdPrefixAndEventsAfterDone) {
  ParserOptions o;
  o.tool_call_id_prefix = "toolu_req7_";
  auto p = OutputParser::create(tok_, o);
  ASSERT_TRUE(p.is_ok());
  Collected c = run(*p, tok_->ids("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
                                  "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos));
  EXPECT_EQ(c.ids, std::vector<std::string>{"toolu_req7_0"});
  EXPECT_TRUE(p->is_done());
  std::vector<ChatEvent> more;
  p->push(1000 + 'x', &more);
  p->finish(FinishReason::kLength, &more);
  EXPECT_TRUE(more.empty());
}

TEST_F(ChatParserTest, RenderedAssistantTurnParsesBackToTheSameMessage) {
  Message a;
  a.role = Role::kAssistant;
  a.reasoning_content = "plan: call both";
  a.content = "Sure.";
  a.tool_calls = {{"call_0", "get_weather", R"({"city": "Paris", "days": [1, 2.5], "x": null})"},
                  {"call_1", "noop", "{}"}};
  Message u;
  u.content = "weather?";
  RenderOptions o;
  o.thinking_mode = ThinkingMode::kThinking;
  std::vector<Message> conv = {u, a};
  auto text = render_text(conv, o);
  ASSERT_TRUE(text.is_ok());
  // The generated part is what follows "<｜Assistant｜><think>".
  std::string generated = text->substr(text->find("<think>") + 7);
  OutputParser p = make(ThinkingMode::kThinking);
  Collected c = run(p, tok_->ids(generated));
  EXPECT_EQ(c.error, "");
  Message back = p.to_message();
  EXPECT_EQ(back.reasoning_content, a.reasoning_content);
  EXPECT_EQ(back.content, a.content);
  ASSERT_EQ(back.tool_calls.size(), 2u);
  EXPECT_EQ(back.tool_calls[0].arguments, a.tool_calls[0].arguments);
  EXPECT_EQ(back.tool_calls[1].arguments, "{}");
  std::vector<Message> again = {u, back};
  EXPECT_EQ(render_text(again, o).value(), *text);
}

TEST(ChatParserCreateTest, NeedsTheMarkerTokens) {
  class NoDsml : public FakeTokenizer {
   public:
    std::optional<int32_t> token_to_id(std::string_view t) const override {
      return t == "｜DSML｜" ? std::nullopt : FakeTokenizer::token_to_id(t);
    }
  };
  auto p = OutputParser::create(std::make_shared<NoDsml>(), ParserOptions{});
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().message(), "OutputParser: tokenizer has no special token ｜DSML｜");
}

}  // namespace
}  // namespace deepinfer::chat

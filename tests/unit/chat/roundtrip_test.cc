// Randomized render -> parse round trips: an assistant turn with reasoning, content and tool calls
// whose strings are full of markup look-alikes ("</｜DSML｜parameter>", "</think>", "<", quotes,
// newlines, emoji) is rendered to structural ids, and the parser must give back exactly the same
// reasoning, content and arguments (arguments in Python json.dumps form, as the reference decodes
// them). Runs with the fake tokenizer and, when present, the real one.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/chat.h"
#include "fake_tokenizer.h"
#include "tokenizer/chat/py_json.h"

namespace deepinfer::chat {
namespace {

using pyjson::Value;

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  std::string text(int max_pieces) {
    static const char* kPieces[] = {"a", "Z", " ", "\n", "\"", "\\", "<", "</", ">", "東", "😀",
                                    "｜DSML｜", "</｜DSML｜parameter>", "<think>", "</think>", "\t",
                                    "{", "}", "\x01", "<｜end▁of▁sentence｜>", "string=\"true\">",
                                    "\n\n<", "word", "."};
    std::string out;
    int n = pick(max_pieces + 1);
    for (int i = 0; i < n; ++i) out += kPieces[pick(std::size(kPieces))];
    return out;
  }
  std::string key() {
    static const char* kKeys[] = {"city", "n", "x_1", "東京", "a b", "deep"};
    return kKeys[pick(std::size(kKeys))] + std::to_string(pick(100));
  }
  Value value(int depth) {
    Value v;
    switch (pick(depth > 2 ? 4 : 6)) {
      case 0: v.type = Value::Type::kString; v.text = text(6); break;
      case 1: v.type = Value::Type::kInt; v.text = std::to_string(static_cast<int>(pick(2000)) - 1000); break;
      case 2: v.type = Value::Type::kFloat; v.number = (static_cast<int>(pick(2000)) - 1000) / 8.0; break;
      case 3: v.type = pick(2) ? Value::Type::kBool : Value::Type::kNull; v.boolean = pick(2); break;
      case 4:
        v.type = Value::Type::kArray;
        for (int i = pick(3); i > 0; --i) v.items.push_back(value(depth + 1));
        break;
      default:
        v.type = Value::Type::kObject;
        for (int i = pick(3); i > 0; --i) v.members.emplace_back(key(), value(depth + 1));
    }
    return v;
  }
  ToolCall call(int index) {
    Value args;
    args.type = Value::Type::kObject;
    for (int i = pick(4); i > 0; --i) {
      std::string k = key();
      bool dup = false;
      for (const auto& [existing, unused] : args.members) dup |= existing == k;
      if (!dup) args.members.emplace_back(k, value(0));
    }
    return ToolCall{"call_" + std::to_string(index), "tool_" + key(), pyjson::dump(args)};
  }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  std::mt19937 rng_;
};

void check_round_trips(const Tokenizer& tok, std::shared_ptr<const Tokenizer> shared,
                       ModelFamily family, int n_cases) {
  Generator gen(1234 + static_cast<int>(family));
  for (int c = 0; c < n_cases; ++c) {
    Message user;
    user.content = gen.text(4);
    Message assistant;
    assistant.role = Role::kAssistant;
    assistant.reasoning_content = gen.text(8);
    assistant.content = gen.text(8);
    for (int k = static_cast<int>(gen.pick(3)); k > 0; --k) {
      assistant.tool_calls.push_back(gen.call(static_cast<int>(assistant.tool_calls.size())));
    }
    RenderOptions options;
    options.family = family;
    options.thinking_mode = ThinkingMode::kThinking;
    std::vector<Message> prompt_only = {user};
    std::vector<Message> full = {user, assistant};
    auto prompt = render_ids(prompt_only, options, tok);
    auto all = render_ids(full, options, tok);
    ASSERT_TRUE(prompt.is_ok() && all.is_ok());
    ASSERT_LT(prompt->size(), all->size());
    ASSERT_TRUE(std::equal(prompt->begin(), prompt->end(), all->begin()));

    ParserOptions po;
    po.family = family;
    po.thinking_mode = ThinkingMode::kThinking;
    auto parser = OutputParser::create(shared, po);
    ASSERT_TRUE(parser.is_ok());
    std::vector<ChatEvent> events;
    for (size_t i = prompt->size(); i < all->size(); ++i) parser->push((*all)[i], &events);
    const ParsedOutput& out = parser->output();
    SCOPED_TRACE("case " + std::to_string(c) + " content: " + assistant.content);
    ASSERT_EQ(out.error, "");
    EXPECT_EQ(out.reasoning_content, assistant.reasoning_content);
    EXPECT_EQ(out.content, assistant.content);
    ASSERT_EQ(out.tool_calls.size(), assistant.tool_calls.size());
    for (size_t k = 0; k < out.tool_calls.size(); ++k) {
      EXPECT_EQ(out.tool_calls[k].name, assistant.tool_calls[k].name);
      EXPECT_EQ(out.tool_calls[k].arguments, assistant.tool_calls[k].arguments);
    }
    EXPECT_EQ(out.finish_reason,
              assistant.tool_calls.empty() ? FinishReason::kStop : FinishReason::kToolCalls);
    std::string streamed;
    for (const ChatEvent& e : events) {
      if (e.kind == EventKind::kContentDelta) streamed += e.text;
    }
    EXPECT_EQ(streamed, assistant.content);
  }
}

TEST(ChatRoundTripTest, RandomTurnsWithFakeTokenizer) {
  auto tok = std::make_shared<testing::FakeTokenizer>(
      std::vector<std::string>{"\n\n<", ">\n<", "</", "name=\"", "parameter", "ing", "東京"});
  check_round_trips(*tok, tok, ModelFamily::kV4, 300);
  check_round_trips(*tok, tok, ModelFamily::kV41, 300);
}

TEST(ChatRoundTripTest, RandomTurnsWithRealTokenizer) {
  auto tok = Tokenizer::load_default();
  if (!tok.is_ok()) GTEST_SKIP() << tok.status().to_string();
  check_round_trips(**tok, *tok, ModelFamily::kV4, 200);
  check_round_trips(**tok, *tok, ModelFamily::kV41, 200);
}

}  // namespace
}  // namespace deepinfer::chat

namespace deepinfer::chat {
namespace {

// Arbitrary id streams (markers, markup pieces, bytes, other control tokens): the parser never
// crashes, ends with exactly one kFinish, and its deltas add up to what output() reports.
TEST(ChatRoundTripTest, RandomIdStreamsAreHandled) {
  auto tok = std::make_shared<testing::FakeTokenizer>(std::vector<std::string>{
      "\n\n<", "tool_calls>\n<", "invoke name=\"f\">\n<", "parameter name=\"k\" string=\"true\">",
      "parameter name=\"k\" string=\"false\">", "</", "parameter>\n</", "invoke>\n</",
      "tool_calls>", ">\n<", "1", "x"});
  std::vector<int32_t> alphabet = {1, 128822, 128825, 128803, 2000, 2001, 2002, 2003, 2004, 2005,
                                   2006, 2007, 2008, 2009, 2010, 2011, 1000 + '\n', 1000 + '<',
                                   1000 + 0xE6, 1000 + 0x9D, 1000 + 0xB1};
  std::mt19937 rng(99);
  for (int c = 0; c < 2000; ++c) {
    ParserOptions o;
    o.thinking_mode = c % 2 ? ThinkingMode::kThinking : ThinkingMode::kChat;
    auto parser = OutputParser::create(tok, o);
    ASSERT_TRUE(parser.is_ok());
    std::vector<ChatEvent> events;
    int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) parser->push(alphabet[rng() % alphabet.size()], &events);
    parser->finish(FinishReason::kLength, &events);
    ASSERT_TRUE(parser->is_done());
    int n_finish = 0;
    std::string content, reasoning;
    for (const ChatEvent& e : events) {
      n_finish += e.kind == EventKind::kFinish;
      if (e.kind == EventKind::kContentDelta) content += e.text;
      if (e.kind == EventKind::kReasoningDelta) reasoning += e.text;
    }
    EXPECT_EQ(n_finish, 1);
    EXPECT_EQ(events.back().kind, EventKind::kFinish);
    EXPECT_EQ(content, parser->output().content);
    EXPECT_EQ(reasoning, parser->output().reasoning_content);
    EXPECT_EQ(content.find("｜DSML｜"), std::string::npos);  // only reachable via the marker id
  }
}

}  // namespace
}  // namespace deepinfer::chat

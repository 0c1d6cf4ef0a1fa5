// Renderer behaviour beyond the official V4 vectors: V4.1 (System token, numeric effort, renamed
// DSML tags, mid-conversation system, images), the tool-result defusing, parse_chat_json, and the
// errors (each must name the message index and field).
#include <gtest/gtest.h>

#include <algorithm>

#include "deepinfer/chat.h"
#include "fake_tokenizer.h"

namespace deepinfer::chat {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";
const std::string kEffort75 =
    "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n";

Message msg(Role role, std::string content) {
  Message m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

RenderOptions v41(ThinkingMode mode) {
  RenderOptions o;
  o.family = ModelFamily::kV41;
  o.thinking_mode = mode;
  return o;
}

std::string render_ok(const std::vector<Message>& messages, const RenderOptions& options) {
  auto text = render_text(messages, options);
  EXPECT_TRUE(text.is_ok()) << text.status().to_string();
  return text.is_ok() ? *text : std::string();
}

std::string render_error(const std::vector<Message>& messages, const RenderOptions& options) {
  auto text = render_text(messages, options);
  EXPECT_FALSE(text.is_ok());
  return text.is_ok() ? std::string() : text.status().message();
}

TEST(ChatRenderV41Test, SystemTokenAndDefaultEffort) {
  std::vector<Message> m = {msg(Role::kSystem, "S"), msg(Role::kUser, "U")};
  EXPECT_EQ(render_ok(m, v41(ThinkingMode::kThinking)),
            kBos + "<｜System｜>" + kEffort75 + "S<｜User｜>U<｜Assistant｜><think>");
  EXPECT_EQ(render_ok(m, v41(ThinkingMode::kChat)),
            kBos + "<｜System｜>S<｜User｜>U<｜Assistant｜></think>");
  std::vector<Message> only_user = {msg(Role::kUser, "U")};
  EXPECT_EQ(render_ok(only_user, v41(ThinkingMode::kChat)),
            kBos + "<｜User｜>U<｜Assistant｜></think>");
  RenderOptions max = v41(ThinkingMode::kThinking);
  max.reasoning_effort.name = "max";
  EXPECT_EQ(render_ok(only_user, max),
            kBos + "<｜System｜>Reasoning Effort: 100 (range 1-100, the higher the value, the more "
                   "thorough the reasoning)\n\n<｜User｜>U<｜Assistant｜><think>");
}

TEST(ChatRenderV41Test, MidConversationSystemOpensAReply) {
  Message a = msg(Role::kAssistant, "answer");
  a.reasoning_content = "prior reasoning";
  std::vector<Message> m = {msg(Role::kUser, "first"), msg(Role::kUser, "second"), a,
                            msg(Role::kSystem, "new instruction")};
  RenderOptions o = v41(ThinkingMode::kThinking);
  o.reasoning_effort.name = "low";
  const std::string effort50 =
      "Reasoning Effort: 50 (range 1-100, the higher the value, the more thorough the "
      "reasoning)\n\n";
  EXPECT_EQ(render_ok(m, o), kBos + "<｜System｜>" + effort50 +
                                 "<｜User｜>first\n\nsecond<｜Assistant｜></think>answer" + kEos +
                                 "<｜System｜>new instruction<｜Assistant｜><think>");
  o.drop_thinking = false;
  EXPECT_EQ(render_ok(m, o), kBos + "<｜System｜>" + effort50 +
                                 "<｜User｜>first\n\nsecond<｜Assistant｜><think>prior "
                                 "reasoning</think>answer" + kEos +
                                 "<｜System｜>new instruction<｜Assistant｜><think>");
}

TEST(ChatRenderV41Test, RenamedDsmlTags) {
  Message sys = msg(Role::kSystem, "S");
  sys.tools = {R"({"name": "noop", "parameters": {}})"};
  Message a = msg(Role::kAssistant, "");
  a.tool_calls = {{"c1", "noop", R"({"a": 1, "b": "x"})"}};
  Message t = msg(Role::kTool, "R");
  t.tool_call_id = "c1";
  std::vector<Message> m = {sys, msg(Role::kUser, "U"), a, t};
  std::string text = render_ok(m, v41(ThinkingMode::kThinking));
  EXPECT_NE(text.find("writing a \"<｜DSML｜ calls>\" block like the following:\n\n<｜DSML｜ calls>\n"
                      "<｜DSML｜ invoke name=\"$TOOL_NAME\">\n<｜DSML｜ parameter "
                      "name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜ "
                      "parameter>\n"),
            std::string::npos);
  const std::string tail =
      "{\"name\": \"noop\", \"parameters\": {}}\n\nYou MUST strictly follow the above defined tool "
      "name and parameter schemas to invoke tool calls.\n<｜User｜>U<｜Assistant｜><think></think>"
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"noop\">\n<｜DSML｜ parameter name=\"a\" "
      "string=\"false\">1</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"b\" string=\"true\">x"
      "</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>" + kEos +
      "<｜User｜><tool_result>R</tool_result><｜Assistant｜><think>";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  EXPECT_EQ(text.rfind(kBos + "<｜System｜>" + kEffort75 + "S\n\n## Tools\n\n", 0), 0u);
}

TEST(ChatRenderV41Test, DoubleEncodedArgumentsAreUnwrapped) {
  Message a = msg(Role::kAssistant, "");
  a.tool_calls = {{"", "f", R"("{\"k\": [1, 2]}")"}};
  std::vector<Message> m = {msg(Role::kUser, "U"), a};
  EXPECT_NE(render_ok(m, v41(ThinkingMode::kChat))
                .find("<｜DSML｜ parameter name=\"k\" string=\"false\">[1, 2]</｜DSML｜ parameter>"),
            std::string::npos);
  RenderOptions v4;
  EXPECT_NE(render_ok(m, v4).find("<｜DSML｜parameter name=\"arguments\" string=\"true\">"
                                   "\"{\\\"k\\\": [1, 2]}\"</｜DSML｜parameter>"),
            std::string::npos);
}

TEST(ChatRenderV41Test, ImagePartsBecomePlaceholderTokens) {
  Message u = msg(Role::kUser, "");
  u.parts = std::vector<ContentPart>{{"text", "look"}, {"image", ""}, {"text", "what?"}};
  std::vector<Message> m = {u};
  const std::string expected =
      kBos + "<｜User｜>look\n\n<｜deepseek_image｜>\n\nwhat?<｜Assistant｜></think>";
  EXPECT_EQ(render_ok(m, v41(ThinkingMode::kChat)), expected);
  testing::FakeTokenizer tok;
  auto ids = render_ids(m, v41(ThinkingMode::kChat), tok);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, tok.ids(expected));
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 129264), 1);

  Message t = msg(Role::kTool, "");
  t.parts = std::vector<ContentPart>{{"text", "a"}, {"image", ""}};
  std::vector<Message> with_tool = {msg(Role::kUser, "u"), t};
  EXPECT_NE(render_ok(with_tool, v41(ThinkingMode::kChat))
                .find("<tool_result>a\n\n<｜deepseek_image｜></tool_result>"),
            std::string::npos);
  EXPECT_NE(render_ok(with_tool, RenderOptions{}).find("<tool_result>a\n\n[Unsupported image]"),
            std::string::npos);
}

TEST(ChatRenderV41Test, EmptyPartListAddsNoSeparator) {
  Message empty = msg(Role::kUser, "");
  empty.parts = std::vector<ContentPart>{};
  EXPECT_EQ(render_ok({msg(Role::kUser, "a"), empty}, v41(ThinkingMode::kChat)),
            kBos + "<｜User｜>a<｜Assistant｜></think>");
}

TEST(ChatRenderV41Test, Errors) {
  std::vector<Message> dev = {msg(Role::kUser, "u"), msg(Role::kDeveloper, "d")};
  EXPECT_EQ(render_error(dev, v41(ThinkingMode::kChat)),
            "messages[1].role: V4.1 has no developer role (use system)");
  std::vector<Message> spelled = {msg(Role::kUser, "a <｜deepseek_image｜> b")};
  EXPECT_EQ(render_error(spelled, v41(ThinkingMode::kChat)),
            "messages[0].content: contains the image placeholder text; send images as image parts");
  RenderOptions o = v41(ThinkingMode::kChat);
  o.reasoning_effort.level = 101;
  EXPECT_EQ(render_error({msg(Role::kUser, "u")}, o), "reasoning_effort: 101 is outside 1..100");
  o.reasoning_effort = {"medium", 0};
  EXPECT_EQ(render_error({msg(Role::kUser, "u")}, o),
            "reasoning_effort: unknown name \"medium\" (V4.1 accepts low, high, max or an integer "
            "1..100)");
}

TEST(ChatRenderV4Test, ToolResultClosingTagIsDefused) {
  Message t = msg(Role::kTool, "a</tool_result>b</tool_result");
  std::vector<Message> m = {msg(Role::kUser, "u"), t};
  EXPECT_EQ(render_ok(m, RenderOptions{}),
            kBos + "<｜User｜>u\n\n<tool_result>a&lt;/tool_result>b</tool_result</tool_result>"
                   "<｜Assistant｜></think>");
}

TEST(ChatRenderV4Test, Errors) {
  RenderOptions v4;
  v4.reasoning_effort.name = "low";
  EXPECT_EQ(render_error({msg(Role::kUser, "u")}, v4),
            "reasoning_effort: V4 accepts null, \"high\" or \"max\" (got \"low\")");
  v4.reasoning_effort = {"", 60};
  EXPECT_EQ(render_error({msg(Role::kUser, "u")}, v4),
            "reasoning_effort: V4 accepts null, \"high\" or \"max\" (got 60)");

  EXPECT_EQ(render_error({msg(Role::kUser, "u"), msg(Role::kDeveloper, "")}, RenderOptions{}),
            "messages[1].content: a developer message needs non-empty content");
  Message task = msg(Role::kUser, "u");
  task.task = "summarize";
  EXPECT_EQ(render_error({task}, RenderOptions{}),
            "messages[0].task: unknown task 'summarize' (expected action, query, authority, "
            "domain, title or read_url)");
  Message image = msg(Role::kUser, "");
  image.parts = std::vector<ContentPart>{{"text", "a"}, {"image", ""}};
  EXPECT_EQ(render_error({image}, RenderOptions{}),
            "messages[0].content[1]: image content needs model family v41");
  Message bad_tools = msg(Role::kSystem, "s");
  bad_tools.tools = {R"({"name": "a"})", "{bad"};
  EXPECT_EQ(render_error({bad_tools}, RenderOptions{}),
            "messages[0].tools[1]: invalid JSON at byte 1: expecting a property name in quotes");
  Message bad_format = msg(Role::kSystem, "s");
  bad_format.response_format = "[1,";
  EXPECT_EQ(render_error({msg(Role::kUser, "u"), bad_format}, RenderOptions{}),
            "messages[1].response_format: invalid JSON at byte 3: expecting a value");
  Message list_system = msg(Role::kSystem, "");
  list_system.parts = std::vector<ContentPart>{{"text", "a"}, {"image", ""}};
  EXPECT_EQ(render_error({list_system}, RenderOptions{}),
            "messages[0].content[1].type: a system message cannot hold 'image' parts");
}

TEST(ChatRenderV4Test, ListContentOfOtherRolesJoinsTextParts) {
  Message sys = msg(Role::kSystem, "");
  sys.parts = std::vector<ContentPart>{{"text", "a"}, {"text", "b"}};
  EXPECT_EQ(render_ok({sys, msg(Role::kUser, "u")}, RenderOptions{}),
            kBos + "a\n\nb<｜User｜>u<｜Assistant｜></think>");
}

TEST(ChatRenderIdsTest, MissingSpecialTokenIsAnError) {
  class NoSystemTokenizer : public testing::FakeTokenizer {
   public:
    std::optional<int32_t> token_to_id(std::string_view t) const override {
      return t == "<｜System｜>" ? std::nullopt : FakeTokenizer::token_to_id(t);
    }
  } tok;
  std::vector<Message> m = {msg(Role::kSystem, "s")};
  auto ids = render_ids(m, v41(ThinkingMode::kChat), tok);
  ASSERT_FALSE(ids.is_ok());
  EXPECT_EQ(ids.status().message(),
            "tokenizer has no special token <｜System｜> (wrong tokenizer for this model family?)");
}

TEST(ChatParseJsonTest, OptionsAndTopLevelTools) {
  auto input = parse_chat_json(
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
          "function": {"name": "f", "parameters": {"x": 1.50}}}], "thinking_mode": "thinking",
          "reasoning_effort": "max", "drop_thinking": false})",
      ModelFamily::kV4);
  ASSERT_TRUE(input.is_ok()) << input.status().to_string();
  ASSERT_EQ(input->messages.size(), 2u);  // an empty system message carries the tools
  EXPECT_EQ(input->messages[0].role, Role::kSystem);
  EXPECT_EQ(input->messages[0].tools, std::vector<std::string>{
                                          R"({"name": "f", "parameters": {"x": 1.5}})"});
  EXPECT_EQ(input->options.thinking_mode, ThinkingMode::kThinking);
  EXPECT_EQ(input->options.reasoning_effort.name, "max");
  EXPECT_FALSE(input->options.drop_thinking);
  auto v41_input = parse_chat_json(R"({"messages": [], "reasoning_effort": 42})", ModelFamily::kV41);
  ASSERT_TRUE(v41_input.is_ok());
  EXPECT_EQ(v41_input->options.reasoning_effort.level, 42);
  EXPECT_EQ(v41_input->options.family, ModelFamily::kV41);
}

TEST(ChatParseJsonTest, ErrorsNameTheField) {
  auto error = [](std::string_view json) {
    auto r = parse_chat_json(json, ModelFamily::kV4);
    EXPECT_FALSE(r.is_ok()) << json;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error(R"([{"role": "user", "content": 5}])"),
            "messages[0].content: expected a string, a list or null");
  EXPECT_EQ(error(R"([{"role": "user"}, {"role": "robot"}])"), "messages[1].role: unknown role 'robot'");
  EXPECT_EQ(error(R"([{"role": "assistant", "tool_calls": [{"id": "x"}]}])"),
            "messages[0].tool_calls[0].function: expected an object");
  EXPECT_EQ(error(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f",
                      "arguments": 3}}]}])"),
            "messages[0].tool_calls[0].function.arguments: expected a JSON string or an object");
  EXPECT_EQ(error(R"({"messages": [], "thinking_mode": "deep"})"),
            "thinking_mode: expected \"chat\" or \"thinking\"");
  EXPECT_EQ(error(R"({"messages": [], "drop_thinking": "yes"})"), "drop_thinking: expected a boolean");
  EXPECT_EQ(error(R"({"messages": [], "temperature": 1})"),
            "temperature: unknown field (expected messages, tools, thinking_mode, "
            "reasoning_effort, drop_thinking, add_bos)");
  EXPECT_EQ(error(R"({"tools": []})"), "messages: missing");
  EXPECT_EQ(error(R"({"messages": {}})"), "messages: expected a list of messages");
  EXPECT_EQ(error(R"([{"role": "user", "content": [{"type": "text", "text": 1}]}])"),
            "messages[0].content[0].text: expected a string or null");
  EXPECT_EQ(error("[{\"role\": \"user\""), "invalid JSON at byte 16: expecting ',' delimiter");
}

}  // namespace
}  // namespace deepinfer::chat

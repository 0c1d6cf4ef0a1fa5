// Anthropic Messages round trips: blocks -> conversation -> prompt ids -> simulated model ids ->
// parser -> message object and SSE events; prefill continuation; validation errors.
#include <gtest/gtest.h>

#include "protocol/anthropic.h"
#include "protocol_test_util.h"

namespace deepinfer::protocol {
namespace {

using testing::kEos;

const char* kRequest = R"({
  "model": "deepseek-v4-flash", "max_tokens": 64,
  "system": [{"type": "text", "text": "Be brief."}],
  "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Need the tool.", "signature": "sig"},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"temp\": 21}"},
      {"type": "text", "text": "Thanks"}]}
  ],
  "tools": [{"name": "get_weather", "description": "Weather",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
  "thinking": {"type": "enabled", "budget_tokens": 1024}, "stream": true
})";

ResponseMeta meta() { return ResponseMeta{"msg_abc", 1700000000, "deepseek-v4-flash"}; }

ChatRequest parse_ok(const std::string& body, ProtocolOptions options = {}) {
  auto r = parse_anthropic_messages(Json::parse(body), options);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : ChatRequest{};
}

TEST(AnthropicTest, BlocksBecomeTheConversation) {
  ChatRequest r = parse_ok(kRequest);
  ASSERT_EQ(r.messages.size(), 5u);  // system, user, assistant, tool, user
  EXPECT_EQ(r.messages[0].tools, std::vector<std::string>{
      R"({"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}})"});
  EXPECT_EQ(r.messages[2].reasoning_content, "Need the tool.");
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[3].role, chat::Role::kTool);
  EXPECT_EQ(r.messages[3].tool_call_id, "toolu_1");
  EXPECT_EQ(r.sampling.max_tokens, 64);

  auto tok = testing::make_tokenizer();
  std::string text = tok->decode(prompt_ids(r, *tok).value());
  EXPECT_EQ(text.rfind("<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\n\n", 0), 0u);
  const std::string tail =
      "<｜User｜>Weather in Paris?<｜Assistant｜><think>Need the tool.</think>\n\n<｜DSML｜tool_calls>"
      "\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">"
      "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos +
      "<｜User｜><tool_result>{\"temp\": 21}</tool_result>\n\nThanks<｜Assistant｜><think>";
  ASSERT_GT(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
}

TEST(AnthropicTest, StreamedToolUseEvents) {
  ChatRequest r = parse_ok(kRequest);
  testing::Run run = testing::run_model(r, meta(), testing::tool_call_output("Hot.</think>"), 30);
  AnthropicStreamer streamer(r, meta());
  std::vector<std::string> events = testing::dumps(testing::stream_all(streamer, run));
  auto json_delta = [](const std::string& partial) {
    return R"({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",)"
           R"("partial_json":)" + partial + "}}";
  };
  std::vector<std::string> expected = {
      R"({"type":"message_start","message":{"id":"msg_abc","type":"message","role":"assistant",)"
      R"("model":"deepseek-v4-flash","content":[],"stop_reason":null,"stop_sequence":null,)"
      R"("usage":{"input_tokens":30,"output_tokens":0}}})",
      R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"",)"
      R"("signature":""}})",
      R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hot."}})",
      R"({"type":"content_block_stop","index":0})",
      R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})",
      R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Check."}})",
      R"({"type":"content_block_stop","index":1})",
      R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use",)"
      R"("id":"toolu_abc_0","name":"get_weather","input":{}}})",
      json_delta(R"("{")"), json_delta(R"("\"city\": \"")"), json_delta(R"("Lyon")"),
      json_delta(R"("\"")"), json_delta(R"("}")"),
      R"({"type":"content_block_stop","index":2})",
      R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},)"
      R"("usage":{"output_tokens":17}})",
      R"({"type":"message_stop"})",
  };
  EXPECT_EQ(events, expected);

  auto response = anthropic_response(run.output, r, meta(), run.usage.back());
  ASSERT_TRUE(response.is_ok());
  EXPECT_EQ(response->dump(),
            R"({"id":"msg_abc","type":"message","role":"assistant","model":"deepseek-v4-flash",)"
            R"("content":[{"type":"thinking","thinking":"Hot.","signature":""},{"type":"text",)"
            R"("text":"Check."},{"type":"tool_use","id":"toolu_abc_0","name":"get_weather",)"
            R"("input":{"city":"Lyon"}}],"stop_reason":"tool_use","stop_sequence":null,)"
            R"("usage":{"input_tokens":30,"output_tokens":17}})");
}

TEST(AnthropicTest, PrefilledAssistantTurnIsContinued) {
  ChatRequest r = parse_ok(R"({"max_tokens": 8, "messages": [
      {"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "The answer is"}]})");
  EXPECT_TRUE(r.continue_final_message);
  auto tok = testing::make_tokenizer();
  EXPECT_EQ(tok->decode(prompt_ids(r, *tok).value()),
            "<｜begin▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜><think></think>The answer is");
  // The output continues the content: no reasoning state.
  testing::Run run = testing::run_model(r, meta(), "Sunny." + kEos, 9);
  EXPECT_EQ(run.output.content, "Sunny.");
  EXPECT_EQ(run.output.reasoning_content, "");
}

TEST(AnthropicTest, ChoicesAndEffort) {
  ChatRequest any = parse_ok(R"({"max_tokens": 8, "messages": [],
      "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"},
      "thinking": {"type": "disabled"}})");
  EXPECT_EQ(any.tool_choice.mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(any.render.thinking_mode, chat::ThinkingMode::kChat);
  ChatRequest tool = parse_ok(R"({"max_tokens": 8, "messages": [],
      "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "f"},
      "output_config": {"effort": "max"}})");
  EXPECT_EQ(tool.tool_choice.name, "f");
  EXPECT_EQ(tool.render.reasoning_effort.name, "max");
}

TEST(AnthropicTest, ValidationErrorsNameTheJsonPath) {
  auto error = [](const std::string& body) {
    auto r = parse_anthropic_messages(Json::parse(body), ProtocolOptions{});
    EXPECT_FALSE(r.is_ok()) << body;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error(R"({"messages": []})"), "max_tokens: required");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]})"),
            "messages[0].role: expected \"user\" or \"assistant\"");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                      {"type": "document"}]}]})"),
            "messages[0].content[0].type: unsupported content block type \"document\"");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                      {"type": "tool_result", "content": "x"}]}]})"),
            "messages[0].content[0].tool_use_id: required");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [{"role": "assistant", "content": [
                      {"type": "tool_use", "id": "t", "name": "f", "input": [1]}]}]})"),
            "messages[0].content[0].input: expected an object, got array");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [], "tools": [{"type": "web_search_20250305",
                      "name": "web_search"}]})"),
            "tools[0].type: server tool \"web_search_20250305\" is not supported");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [], "tools": [{"name": "f"}]})"),
            "tools[0].input_schema: required");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [], "tool_choice": {"type": "tool", "name": "g"}})"),
            "tool_choice: names tool \"g\", which is not in tools");
  EXPECT_EQ(error(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image",
                      "source": {"type": "file", "file_id": "f"}}]}]})"),
            "messages[0].content[0].source.type: expected \"base64\" or \"url\"");
}

}  // namespace
}  // namespace deepinfer::protocol

// response_format (Chat Completions) and text.format (Responses) in thinking mode reach the engine
// with StructuredOutput::after_reasoning, so the format constrains the answer after </think> and
// the reasoning stays free text (the parsed reasoning_content is the reasoning, content the
// JSON); with thinking off (per request or by server default) the format constrains the whole
// output. The FakeEngine does not apply grammars: replies are written as the grammar allows.
#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kAnswer = R"({"city":"Oslo"})";
const char* kSchemaFormat =
    R"("response_format": {"type": "json_schema", "json_schema": {"name": "trip", "schema":
       {"type": "object", "properties": {"city": {"type": "string"}}}}})";

// The JSON after reasoning when the prompt opened a think block, else the JSON alone.
std::string json_reply(const std::string& prompt, int) {
  return (prompt.ends_with("<think>") ? "Oslo fits.</think>" : "") + kAnswer + kEos;
}

std::string chat_body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "A city as JSON."}], )" + extra + "}";
}

// The engine request's constraint (fails the test when there is none).
StructuredOutput sent(const TestServer& t) {
  const Request r = t.engine->last_request();
  EXPECT_TRUE(r.structured_output.has_value());
  return r.structured_output.value_or(StructuredOutput{});
}

TEST(ResponseFormatTest, ChatThinkingModeConstrainsOnlyTheAnswer) {
  TestServer t(json_reply);
  ClientResponse r = t.post("/v1/chat/completions", chat_body(kSchemaFormat));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent(t).kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_TRUE(sent(t).after_reasoning);
  const Json message = parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "Oslo fits.");
  EXPECT_EQ(message["content"], kAnswer);
  EXPECT_EQ(parse(r.body)["choices"][0]["finish_reason"], "stop");

  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("response_format": {"type": "json_object"})")).status,
            200);
  EXPECT_EQ(sent(t).kind, StructuredOutput::Kind::kJsonObject);
  EXPECT_TRUE(sent(t).after_reasoning);

  // Streaming: the reasoning streams as reasoning_content, the JSON as content.
  ClientResponse s = t.post("/v1/chat/completions", chat_body(std::string(kSchemaFormat) + R"(, "stream": true)"));
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_TRUE(sent(t).after_reasoning);
  std::string reasoning;
  std::string content;
  for (const Json& chunk : sse_json(s.body)) {
    if (!chunk.is_object() || chunk["choices"].empty()) continue;
    const Json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Oslo fits.");
  EXPECT_EQ(content, kAnswer);
}

TEST(ResponseFormatTest, ChatWithoutThinkingConstrainsTheWholeOutput) {
  TestServer t(json_reply);
  ClientResponse r =
      t.post("/v1/chat/completions", chat_body(std::string(kSchemaFormat) + R"(, "thinking": {"type": "disabled"})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(sent(t).after_reasoning);
  EXPECT_EQ(parse(r.body)["choices"][0]["message"]["content"], kAnswer);

  ASSERT_EQ(t.post("/v1/chat/completions",
                   chat_body(R"("response_format": {"type": "json_object"}, "reasoning_effort": "none")"))
                .status,
            200);
  EXPECT_FALSE(sent(t).after_reasoning);
  // A plain-text format constrains nothing, in either mode.
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("response_format": {"type": "text"})")).status, 200);
  EXPECT_FALSE(t.engine->last_request().structured_output.has_value());
}

TEST(ResponseFormatTest, ServerDefaultWithoutThinking) {
  ServerOptions options = quiet_options();
  options.thinking_by_default = false;
  TestServer t(json_reply, options);
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(kSchemaFormat)).status, 200);
  EXPECT_FALSE(sent(t).after_reasoning);
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(std::string(kSchemaFormat) + R"(, "thinking": {"type": "enabled"})"))
                .status,
            200);
  EXPECT_TRUE(sent(t).after_reasoning);
}

TEST(ResponseFormatTest, ResponsesTextFormatFollowsTheThinkingMode) {
  TestServer t(json_reply);
  const std::string format =
      R"("text": {"format": {"type": "json_schema", "name": "trip", "schema": {"type": "object"}}})";
  ClientResponse r = t.post("/v1/responses", R"({"input": "A city as JSON.", )" + format + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent(t).kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(sent(t).spec, R"({"type":"object"})");
  EXPECT_TRUE(sent(t).after_reasoning);
  const Json output = parse(r.body)["output"];
  ASSERT_EQ(output.size(), 2u) << r.body;
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"][0]["text"], kAnswer);

  ASSERT_EQ(t.post("/v1/responses",
                   R"({"input": "A city as JSON.", "reasoning": {"effort": "none"}, )" + format + "}")
                .status,
            200);
  EXPECT_FALSE(sent(t).after_reasoning);
}

TEST(ResponseFormatTest, ForcedToolCallsKeepTheirOwnThinkingFlag) {
  // The DSML grammar handles reasoning itself ("thinking" in its spec): never after_reasoning.
  TestServer t([](const std::string& prompt, int) {
    return (prompt.ends_with("<think>") ? "Look.</think>" : "") + tool_call_text("Oslo");
  });
  ClientResponse r = t.post(
      "/v1/chat/completions",
      chat_body(R"("tools": [{"type": "function", "function": {"name": "get_weather"}}], "tool_choice": "required")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent(t).kind, StructuredOutput::Kind::kDsmlToolCalls);
  EXPECT_FALSE(sent(t).after_reasoning);
  EXPECT_EQ(parse(sent(t).spec)["thinking"], true);
}

}  // namespace
}  // namespace deepinfer::server::testing

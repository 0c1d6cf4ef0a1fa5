// OpenAI Chat Completions round trips: request JSON -> conversation -> prompt ids -> simulated
// model ids -> OutputParser -> chat.completion / chat.completion.chunk JSON, compared exactly;
// plus request validation errors naming the JSON path.
#include <gtest/gtest.h>

#include "protocol/openai_chat.h"
#include "protocol_test_util.h"

namespace deepinfer::protocol {
namespace {

using testing::kEos;

const char* kToolRequest = R"({
  "model": "deepseek-v4-flash",
  "messages": [
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
     "tool_calls": [{"id": "call_a", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp\": 21}"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "reasoning_effort": "high", "stream": true, "stream_options": {"include_usage": true},
  "max_tokens": 100, "temperature": 0.5, "seed": 7
})";

ResponseMeta meta() { return ResponseMeta{"chatcmpl-abc", 1700000000, "deepseek-v4-flash"}; }

ChatRequest parse_ok(const std::string& body, ProtocolOptions options = {}) {
  auto r = parse_chat_completions(Json::parse(body), options);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : ChatRequest{};
}

TEST(OpenAIChatTest, RequestBecomesTheOfficialConversation) {
  ChatRequest r = parse_ok(kToolRequest);
  EXPECT_EQ(r.model, "deepseek-v4-flash");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.sampling.max_tokens, 100);
  EXPECT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_EQ(r.render.thinking_mode, chat::ThinkingMode::kThinking);
  EXPECT_EQ(r.render.reasoning_effort.name, "high");
  EXPECT_EQ(r.tool_names, std::vector<std::string>{"get_weather"});
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, chat::Role::kSystem);  // OpenAI developer = system prompt
  EXPECT_EQ(r.messages[0].tools, std::vector<std::string>{
      R"({"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}})"});

  auto tok = testing::make_tokenizer();
  auto ids = prompt_ids(r, *tok);
  ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
  std::string text = tok->decode(*ids);
  const std::string head = "<｜begin▁of▁sentence｜>Be brief.\n\n## Tools\n\n";
  const std::string tail =
      "{\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\": {\"type\": "
      "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}\n\nYou MUST strictly follow "
      "the above defined tool name and parameter schemas to invoke tool calls.\n<｜User｜>Weather in "
      "Paris?<｜Assistant｜><think>Need the tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
      "name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜"
      "parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos +
      "<｜User｜><tool_result>{\"temp\": 21}</tool_result><｜Assistant｜><think>";
  EXPECT_EQ(text.substr(0, head.size()), head);
  ASSERT_GT(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  EXPECT_EQ(*ids, tok->ids(text));  // structural ids = reference tokenization of the text
}

TEST(OpenAIChatTest, SeveralChoicesAreReadIntoN) {
  EXPECT_EQ(parse_ok(R"({"messages": [], "n": 3})").sampling.n, 3);
  EXPECT_EQ(parse_ok(R"({"messages": []})").sampling.n, 1);
}

TEST(OpenAIChatTest, StreamedAnswerWithReasoning) {
  ChatRequest r = parse_ok(kToolRequest);
  testing::Run run = testing::run_model(r, meta(), "Hot.</think>Sunny." + kEos, 42);
  ChatCompletionsStreamer streamer(r, meta());
  std::vector<std::string> chunks = testing::dumps(testing::stream_all(streamer, run));
  const std::string envelope =
      R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
      R"("model":"deepseek-v4-flash","choices":[{"index":0,"delta":)";
  std::vector<std::string> expected = {
      envelope + R"({"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null})",
      envelope + R"({"reasoning_content":"Hot."},"logprobs":null,"finish_reason":null}],"usage":null})",
      envelope + R"({"content":"Sunny."},"logprobs":null,"finish_reason":null}],"usage":null})",
      envelope + R"({},"logprobs":null,"finish_reason":"stop"}],"usage":null})",
      R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
      R"("model":"deepseek-v4-flash","choices":[],"usage":{"prompt_tokens":42,)"
      R"("completion_tokens":4,"total_tokens":46,"completion_tokens_details":{"reasoning_tokens":2}}})",
  };
  EXPECT_EQ(chunks, expected);

  auto response = chat_completion_response(run.output, r, meta(), run.usage.back());
  ASSERT_TRUE(response.is_ok());
  EXPECT_EQ(response->dump(),
            R"({"id":"chatcmpl-abc","object":"chat.completion","created":1700000000,)"
            R"("model":"deepseek-v4-flash","choices":[{"index":0,"message":{"role":"assistant",)"
            R"("content":"Sunny.","reasoning_content":"Hot."},"logprobs":null,)"
            R"("finish_reason":"stop"}],"usage":{"prompt_tokens":42,"completion_tokens":4,)"
            R"("total_tokens":46,"completion_tokens_details":{"reasoning_tokens":2}}})");
}

TEST(OpenAIChatTest, StreamedToolCall) {
  ChatRequest r = parse_ok(kToolRequest);
  r.include_usage = false;
  testing::Run run = testing::run_model(r, meta(), testing::tool_call_output("Hot.</think>"), 42);
  ChatCompletionsStreamer streamer(r, meta());
  std::vector<std::string> chunks = testing::dumps(testing::stream_all(streamer, run));
  auto chunk = [](const std::string& delta, const std::string& finish) {
    return R"({"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1700000000,)"
           R"("model":"deepseek-v4-flash","choices":[{"index":0,"delta":)" + delta +
           R"(,"logprobs":null,"finish_reason":)" + finish + "}]}";
  };
  auto args = [&](const std::string& json_string) {
    return chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":)" + json_string + "}}]}",
                 "null");
  };
  std::vector<std::string> expected = {
      chunk(R"({"role":"assistant","content":""})", "null"),
      chunk(R"({"reasoning_content":"Hot."})", "null"),
      chunk(R"({"content":"Check."})", "null"),
      chunk(R"({"tool_calls":[{"index":0,"id":"call_abc_0","type":"function",)"
            R"("function":{"name":"get_weather","arguments":""}}]})", "null"),
      args(R"("{")"), args(R"("\"city\": \"")"), args(R"("Lyon")"), args(R"("\"")"),
      args(R"("}")"),
      chunk("{}", R"("tool_calls")"),
  };
  EXPECT_EQ(chunks, expected);

  auto response = chat_completion_response(run.output, r, meta(), run.usage.back());
  ASSERT_TRUE(response.is_ok());
  EXPECT_EQ((*response)["choices"][0]["message"].dump(),
            R"({"role":"assistant","content":"Check.","reasoning_content":"Hot.","tool_calls":)"
            R"([{"id":"call_abc_0","type":"function","function":{"name":"get_weather",)"
            R"("arguments":"{\"city\": \"Lyon\"}"}}]})");
  EXPECT_EQ((*response)["choices"][0]["finish_reason"], "tool_calls");

  // The assistant turn goes back into the next request exactly as it was generated.
  Json next = Json::parse(kToolRequest);
  next["messages"].push_back(response->at("choices")[0]["message"]);
  next["messages"].push_back(Json{{"role", "tool"}, {"tool_call_id", "call_abc_0"}, {"content", "cold"}});
  ChatRequest r2 = parse_ok(next.dump());
  auto tok = testing::make_tokenizer();
  std::string prompt = tok->decode(prompt_ids(r2, *tok).value());
  EXPECT_NE(prompt.find("<｜Assistant｜><think>Hot.</think>Check.\n\n<｜DSML｜tool_calls>\n"
                        "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
                        "string=\"true\">Lyon</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜"
                        "tool_calls>" + kEos + "<｜User｜><tool_result>cold</tool_result>"),
            std::string::npos);
}

TEST(OpenAIChatTest, MalformedOutputEndsTheStreamWithAnError) {
  ChatRequest r = parse_ok(R"({"messages": [{"role": "user", "content": "hi"}],
                               "thinking": {"type": "disabled"}})");
  EXPECT_EQ(r.render.thinking_mode, chat::ThinkingMode::kChat);
  testing::Run run = testing::run_model(r, meta(), "Check.\n\n<｜DSML｜tool_call>" + kEos, 3);
  ChatCompletionsStreamer streamer(r, meta());
  std::vector<Json> chunks = testing::stream_all(streamer, run);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back().dump(),
            R"({"error":{"message":"model output could not be parsed: malformed DSML tool call )"
            R"(markup after tool call 0","type":"server_error","code":"invalid_model_output"}})");
  for (const Json& c : chunks) EXPECT_EQ(c.dump().find("DSML｜"), std::string::npos);
  auto response = chat_completion_response(run.output, r, meta(), run.usage.back());
  ASSERT_FALSE(response.is_ok());
  EXPECT_EQ(response.status().code(), StatusCode::kInternal);
}

TEST(OpenAIChatTest, OptionsMapping) {
  ChatRequest none = parse_ok(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none",
      "response_format": {"type": "json_object"}, "reasoning_effort": "none"})");
  EXPECT_EQ(none.render.thinking_mode, chat::ThinkingMode::kChat);
  EXPECT_EQ(none.tool_choice.mode, ToolChoiceMode::kNone);
  ASSERT_EQ(none.messages.size(), 2u);
  EXPECT_TRUE(none.messages[0].tools.empty());  // "none": the model is not shown the tools
  EXPECT_EQ(none.messages[0].response_format, R"({"type":"json_object"})");

  ProtocolOptions v41{chat::ModelFamily::kV41, false};
  ChatRequest named = parse_ok(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}}, "reasoning_effort": 30,
      "chat_template_kwargs": {"enable_thinking": true, "drop_thinking": false}})", v41);
  EXPECT_EQ(named.tool_choice.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(named.tool_choice.name, "f");
  EXPECT_EQ(named.render.reasoning_effort.level, 30);
  EXPECT_EQ(named.render.thinking_mode, chat::ThinkingMode::kThinking);
  EXPECT_FALSE(named.render.drop_thinking);

  ChatRequest low = parse_ok(R"({"messages": [], "reasoning_effort": "low"})", v41);
  EXPECT_EQ(low.render.reasoning_effort.name, "low");
  EXPECT_EQ(low.render.thinking_mode, chat::ThinkingMode::kChat);  // server default: off
  ChatRequest v4_low = parse_ok(R"({"messages": [], "reasoning_effort": "minimal"})");
  EXPECT_EQ(v4_low.render.reasoning_effort.name, "");
  ChatRequest v4_max = parse_ok(R"({"messages": [], "reasoning_effort": "xhigh"})");
  EXPECT_EQ(v4_max.render.reasoning_effort.name, "max");
}

TEST(OpenAIChatTest, ValidationErrorsNameTheJsonPath) {
  auto error = [](const std::string& body, ProtocolOptions options = {}) {
    auto r = parse_chat_completions(Json::parse(body), options);
    EXPECT_FALSE(r.is_ok()) << body;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error(R"({"model": "m"})"), "messages: required");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": 5}]})"),
            "messages[0].content: expected a string or an array of content parts, got number");
  EXPECT_EQ(error(R"({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})"),
            "messages[0].content[0].type: unsupported content part type \"input_audio\"");
  EXPECT_EQ(error(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "x",
                      "function": {"arguments": "{}"}}]}]})"),
            "messages[0].tool_calls[0].function.name: required");
  EXPECT_EQ(error(R"({"messages": [{"role": "tool", "content": "r"}]})"),
            "messages[0].tool_call_id: required");
  EXPECT_EQ(error(R"({"messages": [{"role": "function", "content": "r"}]})"),
            "messages[0].role: unsupported role \"function\"");
  EXPECT_EQ(error(R"({"messages": [], "tools": [{"type": "web_search"}]})"),
            "tools[0].type: only \"function\" tools are supported");
  EXPECT_EQ(error(R"({"messages": [], "tool_choice": {"type": "function", "function": {"name": "g"}}})"),
            "tool_choice: names tool \"g\", which is not in tools");
  EXPECT_EQ(error(R"({"messages": [], "tool_choice": "required"})"),
            "tool_choice: \"required\" needs at least one tool");
  EXPECT_EQ(error(R"({"messages": [], "reasoning_effort": "extreme"})"),
            "reasoning_effort: unknown effort \"extreme\" (expected none, minimal, low, medium, "
            "high, xhigh or max)");
  EXPECT_EQ(error(R"({"messages": [], "reasoning_effort": 50})"),
            "reasoning_effort: an integer effort needs model family v41");
  EXPECT_EQ(error(R"({"messages": [], "n": 0})"), "n = 0 is outside [1, 128]");
  EXPECT_EQ(error(R"({"messages": [], "n": 129})"), "n = 129 is outside [1, 128]");
  EXPECT_EQ(error(R"({"messages": [], "stop": ["a", 1]})"), "stop[1]: expected a string, got number");
  EXPECT_EQ(error(R"({"messages": [], "response_format": {"type": "yaml"}})"),
            "response_format.type: expected \"text\", \"json_object\" or \"json_schema\"");
  EXPECT_EQ(error(R"({"messages": [], "stream": true, "stream_options": {"include_usage": "yes"}})"),
            "stream_options.include_usage: expected a boolean, got string");
  // As OpenAI and vLLM: stream options without a stream, alternatives without logprobs.
  EXPECT_EQ(error(R"({"messages": [], "stream_options": {"include_usage": true}})"),
            "stream_options: only allowed when stream is true");
  EXPECT_EQ(error(R"({"messages": [], "top_logprobs": 2})"), "top_logprobs: requires logprobs to be true");
  EXPECT_EQ(error(R"({"messages": [], "logprobs": false, "top_logprobs": 0})"),
            "top_logprobs: requires logprobs to be true");
  EXPECT_FALSE(error(R"({"messages": [], "top_p": 1.5})").empty());
}

}  // namespace
}  // namespace deepinfer::protocol

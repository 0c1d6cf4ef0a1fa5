// Forced tool calls reach the engine as a DSML tool-call grammar (StructuredOutput kind
// kDsmlToolCalls): tool_choice "required" / a named function (Chat Completions, Responses) and
// Anthropic {"type": "any" | "tool"}, parallel_tool_calls / disable_parallel_tool_use, the
// request's thinking mode and the model family in the spec; "auto" and "none" send no grammar;
// a forced call together with a response format is a 400 naming both.
#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const char* kWeatherParams =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";
const char* kNoParams = R"({"type": "object", "properties": {}, "additionalProperties": false})";

// A get_weather call, after reasoning when the prompt opened a think block (the FakeEngine does
// not apply the grammar: the reply must already be what the grammar allows).
std::string call_reply(const std::string& prompt, int) {
  return (prompt.ends_with("<think>") ? "Look.</think>" : "") + tool_call_text("Rome");
}

// Chat Completions tools: get_weather(city) and get_time() (no parameters member).
std::string chat_tools() {
  return std::string(
             R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": )") +
         kWeatherParams +
         R"(}}, {"type": "function", "function": {"name": "get_time", "description": "Now."}}])";
}

std::string chat_body(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}], )" + chat_tools() +
         ", " + extra + "}";
}

Json spec_json(bool required, bool thinking, bool allow_content, bool parallel, bool v41,
               const std::vector<std::string>& names) {
  Json tools = Json::array();
  for (const std::string& name : names) {
    tools.push_back(
        Json{{"name", name},
             {"parameters", Json::parse(name == "get_weather" ? kWeatherParams : kNoParams)}});
  }
  return Json{{"tools", tools},
              {"required", required},
              {"thinking", thinking},
              {"allow_content", allow_content},
              {"parallel_calls", parallel},
              {"v41_tags", v41},
              {"any_order", true}};
}

// The DSML spec the engine received (fails the test when there is none or another kind).
Json sent_spec(const TestServer& t) {
  Request r = t.engine->last_request();
  EXPECT_TRUE(r.structured_output.has_value());
  if (!r.structured_output) return nullptr;
  EXPECT_EQ(r.structured_output->kind, StructuredOutput::Kind::kDsmlToolCalls);
  return Json::parse(r.structured_output->spec);
}

TEST(ToolChoiceTest, RequiredSendsEveryToolAndForbidsContent) {
  TestServer t(call_reply);
  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"("tool_choice": "required")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent_spec(t), spec_json(true, true, false, true, false, {"get_weather", "get_time"}));
  Json j = parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(ToolChoiceTest, NamedFunctionSendsOnlyThatTool) {
  TestServer t(call_reply);
  ClientResponse r =
      t.post("/v1/chat/completions",
             chat_body(R"("tool_choice": {"type": "function", "function": {"name": "get_time"}},
                                         "parallel_tool_calls": false, "thinking": {"type": "disabled"})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent_spec(t), spec_json(true, false, false, false, false, {"get_time"}));
  // OpenAI answers a named tool_choice with finish_reason "stop" (a "required" call says
  // "tool_calls", above), streaming or not.
  Json j = parse(r.body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << r.body;
  ClientResponse s = t.post(
      "/v1/chat/completions",
      chat_body(R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "stream": true)"));
  ASSERT_EQ(s.status, 200) << s.body;
  std::vector<std::string> finishes;
  bool streamed_call = false;
  for (const Json& chunk : sse_json(s.body)) {
    if (!chunk.is_object() || chunk["choices"].empty()) continue;
    const Json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) finishes.push_back(choice["finish_reason"]);
    if (choice["delta"].contains("tool_calls")) streamed_call = true;
  }
  EXPECT_TRUE(streamed_call) << s.body;
  EXPECT_EQ(finishes, std::vector<std::string>{"stop"}) << s.body;
  // "required" keeps "tool_calls" when streaming too.
  ClientResponse req =
      t.post("/v1/chat/completions", chat_body(R"("tool_choice": "required", "stream": true)"));
  ASSERT_EQ(req.status, 200) << req.body;
  EXPECT_NE(req.body.find(R"("finish_reason":"tool_calls")"), std::string::npos) << req.body;
}

TEST(ToolChoiceTest, AutoAndNoneSendNoGrammarUnlessParallelCallsAreOff) {
  TestServer t(fixed_reply("Ok.</think>Fine." + kEos));
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("tool_choice": "auto")")).status, 200);
  EXPECT_FALSE(t.engine->last_request().structured_output.has_value());
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("parallel_tool_calls": true)")).status,
            200);
  EXPECT_FALSE(t.engine->last_request().structured_output.has_value());
  ASSERT_EQ(t.post("/v1/chat/completions",
                   chat_body(R"("tool_choice": "none", "parallel_tool_calls": false)"))
                .status,
            200);
  EXPECT_FALSE(t.engine->last_request().structured_output.has_value());
  // Without tools nothing is constrained either.
  ASSERT_EQ(t.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
                                               "parallel_tool_calls": false})")
                .status,
            200);
  EXPECT_FALSE(t.engine->last_request().structured_output.has_value());
  // auto + parallel_tool_calls false: content or at most one call.
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("parallel_tool_calls": false)")).status,
            200);
  EXPECT_EQ(sent_spec(t), spec_json(false, true, true, false, false, {"get_weather", "get_time"}));
}

TEST(ToolChoiceTest, ForcedCallWithResponseFormatIs400NamingBoth) {
  TestServer t(fixed_reply("{}" + kEos));
  ClientResponse r =
      t.post("/v1/chat/completions",
             chat_body(R"("tool_choice": "required", "response_format": {"type": "json_object"})"));
  ASSERT_EQ(r.status, 400) << r.body;
  Json e = parse(r.body)["error"];
  EXPECT_EQ(e["param"], "tool_choice");
  EXPECT_EQ(e["message"],
            "tool_choice: \"required\" cannot be combined with response_format (both constrain the "
            "whole output); send one of them");
  ClientResponse named =
      t.post("/v1/responses", R"({"input": "Hi", "tool_choice": {"type": "function",
      "name": "get_weather"}, "text": {"format": {"type": "json_object"}}, "tools": [{"type": "function",
      "name": "get_weather", "parameters": {"type": "object"}}]})");
  ASSERT_EQ(named.status, 400) << named.body;
  EXPECT_NE(parse(named.body)["error"]["message"].get<std::string>().find(
                "a named tool cannot be combined with "
                "text.format"),
            std::string::npos)
      << named.body;
  // A response format with tool_choice auto keeps the format.
  ASSERT_EQ(
      t.post("/v1/chat/completions", chat_body(R"("response_format": {"type": "json_object"})"))
          .status,
      200);
  EXPECT_EQ(t.engine->last_request().structured_output->kind, StructuredOutput::Kind::kJsonObject);
}

TEST(ToolChoiceTest, ParametersMustBeASchemaObject) {
  TestServer t(call_reply);
  ClientResponse r =
      t.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}], "tool_choice": "required"})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(parse(r.body)["error"]["message"],
            "tools[0]: the parameters must be a JSON schema object");
}

TEST(ToolChoiceTest, ToolsWithMoreThanTenParametersUseSchemaOrder) {
  TestServer t(call_reply);
  Json properties = Json::object();
  for (int k = 0; k < 11; ++k) properties["p" + std::to_string(k)] = Json{{"type", "integer"}};
  Json body{
      {"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})},
      {"tools",
       Json::array({Json{{"type", "function"},
                         {"function",
                          {{"name", "wide"},
                           {"parameters", {{"type", "object"}, {"properties", properties}}}}}}})},
      {"tool_choice", "required"}};
  ASSERT_EQ(t.post("/v1/chat/completions", body.dump()).status, 200);
  EXPECT_EQ(sent_spec(t)["any_order"], false);
  properties.erase("p10");
  body["tools"][0]["function"]["parameters"]["properties"] = properties;
  ASSERT_EQ(t.post("/v1/chat/completions", body.dump()).status, 200);
  EXPECT_EQ(sent_spec(t)["any_order"], true);
}

TEST(ToolChoiceTest, ResponsesRequiredAndNamed) {
  TestServer t(call_reply);
  const std::string tools =
      std::string(R"("tools": [{"type": "function", "name": "get_weather", "parameters": )") +
      kWeatherParams + R"(}, {"type": "function", "name": "get_time"}])";
  ASSERT_EQ(
      t.post("/v1/responses", R"({"input": "Oslo?", "tool_choice": "required", )" + tools + "}")
          .status,
      200);
  EXPECT_EQ(sent_spec(t), spec_json(true, true, false, true, false, {"get_weather", "get_time"}));
  ClientResponse r = t.post("/v1/responses", R"({"input": "Oslo?", "parallel_tool_calls": false,
      "tool_choice": {"type": "function", "name": "get_weather"}, )" +
                                                 tools + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(sent_spec(t), spec_json(true, true, false, false, false, {"get_weather"}));
  EXPECT_EQ(parse(r.body)["output"].back()["type"], "function_call");
}

TEST(ToolChoiceTest, AnthropicAnyToolAndPrefill) {
  TestServer t(call_reply);
  const std::string tools = std::string(R"("tools": [{"name": "get_weather", "input_schema": )") +
                            kWeatherParams +
                            R"(}, {"name": "get_time", "input_schema": {"type": "object"}}])";
  const std::string user =
      R"("max_tokens": 1000, "messages": [{"role": "user", "content": "Rome?"}])";
  ClientResponse any =
      t.post("/v1/messages", "{" + user + R"(, "tool_choice": {"type": "any"}, )" + tools + "}");
  ASSERT_EQ(any.status, 200) << any.body;
  Json expected = spec_json(true, true, false, true, false, {"get_weather", "get_time"});
  expected["tools"][1]["parameters"] =
      Json::parse(R"({"type": "object"})");  // input_schema as given
  EXPECT_EQ(sent_spec(t), expected);
  EXPECT_EQ(parse(any.body)["stop_reason"], "tool_use");

  ASSERT_EQ(t.post("/v1/messages", "{" + user +
                                       R"(, "tool_choice": {"type": "tool", "name": "get_weather",
      "disable_parallel_tool_use": true}, "thinking": {"type": "disabled"}, )" +
                                       tools + "}")
                .status,
            200);
  EXPECT_EQ(sent_spec(t), spec_json(true, false, false, false, false, {"get_weather"}));

  // A prefilled assistant turn continues as content: no reasoning before the call, even in thinking
  // mode.
  ASSERT_EQ(t.post("/v1/messages",
                   R"({"max_tokens": 1000, "thinking": {"type": "enabled", "budget_tokens": 1024},
      "messages": [{"role": "user", "content": "Rome?"}, {"role": "assistant", "content": "Calling."}],
      "tool_choice": {"type": "any"}, )" +
                       tools + "}")
                .status,
            200);
  EXPECT_EQ(sent_spec(t)["thinking"], false);

  ClientResponse bad = t.post("/v1/messages", "{" + user + R"(, "tool_choice": {"type": "any",
      "disable_parallel_tool_use": "yes"}, )" + tools +
                                                  "}");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("tool_choice.disable_parallel_tool_use"), std::string::npos) << bad.body;
}

TEST(ToolChoiceTest, V41ServerAsksForV41Tags) {
  FakeEngine::Options engine;
  engine.family = "deepseek_v41";
  TestServer t(fixed_reply("Ok." + kEos), quiet_options(), engine);
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"("tool_choice": "required")")).status, 200);
  EXPECT_EQ(sent_spec(t), spec_json(true, true, false, true, true, {"get_weather", "get_time"}));
}

}  // namespace
}  // namespace deepinfer::server::testing

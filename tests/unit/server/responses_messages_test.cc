// POST /v1/responses and POST /v1/messages end to end against the FakeEngine: response objects,
// the typed event streams (Responses: response.created ... response.completed; Messages:
// message_start, content_block_*, message_delta, message_stop), tool calls, stop sequences.
#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kReply = "Think.</think>Hello!" + kEos;

std::vector<std::string> event_names(const std::string& body) {
  std::vector<std::string> names;
  for (const SseEvent& e : parse_sse(body)) names.push_back(e.event);
  return names;
}

TEST(ResponsesTest, ResponseObject) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/responses", R"({"model": "deepseek-v4-flash", "input": "Hi", "instructions": "Be kind."})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  ASSERT_EQ(j["output"].size(), 2u);
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][1]["type"], "message");
  EXPECT_EQ(j["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][1]["content"][0]["text"], "Hello!");
  EXPECT_EQ(j["usage"]["output_tokens"], 14);
  EXPECT_EQ(j["usage"]["input_tokens_details"]["cached_tokens"], 0);
  std::string prompt = t.tokenizer->decode(t.engine->last_request().prompt_ids);
  EXPECT_EQ(prompt.rfind("<｜begin▁of▁sentence｜>Be kind.<｜User｜>Hi<｜Assistant｜><think>", 0), 0u) << prompt;
}

// Every response object echoes the request's settings, as OpenAI's do (clients read them back).
TEST(ResponsesTest, ResponseObjectEchoesTheRequest) {
  TestServer t(fixed_reply(kReply));
  Json j = parse(t.post("/v1/responses", R"({"input": "Hi", "instructions": "Be kind.", "temperature": 0.7,
      "max_output_tokens": 50, "parallel_tool_calls": false, "tool_choice": "auto",
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]})").body);
  EXPECT_EQ(j["instructions"], "Be kind.");
  EXPECT_EQ(j["temperature"], 0.7);
  EXPECT_EQ(j["top_p"], 1.0);
  EXPECT_EQ(j["max_output_tokens"], 50);
  EXPECT_EQ(j["parallel_tool_calls"], false);
  EXPECT_EQ(j["tool_choice"], "auto");
  ASSERT_EQ(j["tools"].size(), 1u);
  EXPECT_EQ(j["tools"][0]["type"], "function");
  EXPECT_EQ(j["tools"][0]["name"], "f");
  EXPECT_EQ(j["text"]["format"]["type"], "text");
  EXPECT_EQ(j["reasoning"]["effort"], "high");
  EXPECT_EQ(j["truncation"], "disabled");
  EXPECT_EQ(j["previous_response_id"], nullptr);
  EXPECT_EQ(j["store"], false);
  EXPECT_TRUE(j["metadata"].is_object());
  TestServer no_thinking(fixed_reply("Hello!" + kEos));
  Json plain = parse(no_thinking.post("/v1/responses", R"({"input": "Hi", "reasoning": {"effort": "none"}})").body);
  EXPECT_EQ(plain["instructions"], nullptr);
  EXPECT_EQ(plain["max_output_tokens"], nullptr);
  EXPECT_EQ(plain["reasoning"]["effort"], "none");
  EXPECT_EQ(plain["tools"], Json::array());
}

// A turn cut at max_output_tokens: the response and its message item are both incomplete.
TEST(ResponsesTest, TokenLimitMakesTheMessageIncomplete) {
  TestServer t(fixed_reply("Think.</think>Hello there, a long answer." + kEos));
  Json j = parse(t.post("/v1/responses", R"({"input": "Hi", "max_output_tokens": 12})").body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"].back()["type"], "message");
  EXPECT_EQ(j["output"].back()["status"], "incomplete");
  ClientResponse r = t.post("/v1/responses", R"({"input": "Hi", "max_output_tokens": 12, "stream": true})");
  const std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event, "response.incomplete");
  const Json last = Json::parse(events.back().data);
  EXPECT_EQ(last["response"]["output"].back()["status"], "incomplete");
  EXPECT_EQ(last["response"]["temperature"], 1.0);
  bool item_done = false;
  for (const SseEvent& e : events) {
    const Json d = Json::parse(e.data);
    if (e.event == "response.output_item.done" && d["item"]["type"] == "message") {
      EXPECT_EQ(d["item"]["status"], "incomplete");
      item_done = true;
    }
  }
  EXPECT_TRUE(item_done);
}

TEST(ResponsesTest, EventStream) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/responses", R"({"input": [{"role": "user", "content": "Hi"}], "stream": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.front().event, "response.created");
  EXPECT_EQ(events.back().event, "response.completed");
  std::string text;
  int64_t expected_sequence = 0;
  for (const SseEvent& e : events) {
    Json j = Json::parse(e.data);
    EXPECT_EQ(j["type"], e.event);
    EXPECT_EQ(j["sequence_number"], expected_sequence++);
    if (e.event == "response.output_text.delta") text += j["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello!");
  Json completed = Json::parse(events.back().data);
  EXPECT_EQ(completed["response"]["status"], "completed");
  EXPECT_EQ(completed["response"]["usage"]["output_tokens"], 14);
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
}

TEST(ResponsesTest, FunctionCallItem) {
  TestServer t(fixed_reply("Need it.</think>" + tool_call_text("Oslo")));
  ClientResponse r = t.post("/v1/responses", R"({"input": "Weather in Oslo?", "tools": [{"type": "function",
      "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = parse(r.body);
  const Json& call = j["output"].back();
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["arguments"].get<std::string>()), Json::parse(R"({"city": "Oslo"})"));
}

TEST(MessagesTest, MessageObjectWithThinking) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/messages", R"({"model": "deepseek-v4-flash", "max_tokens": 100,
      "system": "Be kind.", "messages": [{"role": "user", "content": "Hi"}],
      "thinking": {"type": "enabled", "budget_tokens": 1024}})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = parse(r.body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(j["content"], Json::parse(R"([{"type": "thinking", "thinking": "Think.", "signature": ""},
                                           {"type": "text", "text": "Hello!"}])"));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_EQ(j["stop_sequence"], nullptr);
  EXPECT_EQ(j["usage"]["output_tokens"], 14);
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 0);
  EXPECT_EQ(t.engine->last_request().sampling.max_tokens, 100);
}

TEST(MessagesTest, EventStream) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/messages", R"({"max_tokens": 100, "stream": true,
      "messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> names = event_names(r.body);
  ASSERT_GE(names.size(), 8u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  std::string thinking, text;
  for (const SseEvent& e : parse_sse(r.body)) {
    Json j = Json::parse(e.data);
    EXPECT_EQ(j["type"], e.event);
    if (e.event != "content_block_delta") continue;
    if (j["delta"]["type"] == "thinking_delta") thinking += j["delta"]["thinking"].get<std::string>();
    if (j["delta"]["type"] == "text_delta") text += j["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(thinking, "Think.");
  EXPECT_EQ(text, "Hello!");
  Json delta = Json::parse(parse_sse(r.body)[names.size() - 2].data);
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["output_tokens"], 14);
}

// Anthropic counts cache reads apart from the input (input + cache_read + cache_creation = the
// prompt), in the message object and in message_start alike.
TEST(MessagesTest, UsageCountsCacheReadsApartFromTheInput) {
  FakeEngine::Options eo;
  eo.cached_tokens = 3;
  TestServer t(fixed_reply(kReply), quiet_options(), eo);
  const std::string body = R"({"max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}])";
  Json j = parse(t.post("/v1/messages", body + "}").body);
  const int n_prompt = static_cast<int>(t.engine->last_request().prompt_ids.size());
  ASSERT_GT(n_prompt, 3);
  EXPECT_EQ(j["usage"]["input_tokens"], n_prompt - 3) << j.dump();
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 3);
  EXPECT_EQ(j["usage"]["cache_creation_input_tokens"], 0);
  ClientResponse r = t.post("/v1/messages", body + R"(, "stream": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json start = Json::parse(parse_sse(r.body).front().data);
  EXPECT_EQ(start["message"]["usage"]["input_tokens"], n_prompt - 3) << start.dump();
  EXPECT_EQ(start["message"]["usage"]["cache_read_input_tokens"], 3);
  EXPECT_EQ(start["message"]["usage"]["cache_creation_input_tokens"], 0);
}

TEST(MessagesTest, ToolUseAndStopSequence) {
  TestServer t([](const std::string& prompt, int) {
    if (prompt.find("<tool_result>") != std::string::npos) return "Done.</think>Sunny. The end." + kEos;
    return "Look.</think>" + tool_call_text("Rome");
  });
  const std::string tools = R"("tools": [{"name": "get_weather", "input_schema": {"type": "object",
      "properties": {"city": {"type": "string"}}}}])";
  Json first = parse(t.post("/v1/messages", R"({"max_tokens": 1000, "messages": [{"role": "user", "content": "Rome?"}], )" +
                                                tools + "}").body);
  EXPECT_EQ(first["stop_reason"], "tool_use");
  const Json& use = first["content"].back();
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], Json::parse(R"({"city": "Rome"})"));
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u);

  Json messages = Json::array({Json{{"role", "user"}, {"content", "Rome?"}},
                               Json{{"role", "assistant"}, {"content", first["content"]}},
                               Json{{"role", "user"}, {"content", Json::array({Json{{"type", "tool_result"},
                                                                                     {"tool_use_id", use["id"]},
                                                                                     {"content", "sunny"}}})}}});
  ClientResponse second = t.post("/v1/messages", R"({"max_tokens": 1000, "stop_sequences": [" The"], "messages": )" +
                                                     messages.dump() + ", " + tools + "}");
  ASSERT_EQ(second.status, 200) << second.body;
  Json j = parse(second.body);
  EXPECT_EQ(j["content"].back()["text"], "Sunny.");
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], " The");
}

TEST(MessagesTest, StreamedStopSequence) {
  TestServer t(fixed_reply("Hm.</think>One. Two." + kEos));
  ClientResponse r = t.post("/v1/messages", R"({"max_tokens": 50, "stream": true, "stop_sequences": ["Two"],
      "messages": [{"role": "user", "content": "Count"}]})");
  std::vector<SseEvent> events = parse_sse(r.body);
  ASSERT_GE(events.size(), 2u);
  Json delta = Json::parse(events[events.size() - 2].data);
  EXPECT_EQ(delta["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(delta["delta"]["stop_sequence"], "Two");
  std::string text;
  for (const SseEvent& e : events) {
    Json j = Json::parse(e.data);
    if (e.event == "content_block_delta" && j["delta"]["type"] == "text_delta") text += j["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "One. ");
}

}  // namespace
}  // namespace deepinfer::server::testing

// POST /v1/chat/completions end to end over loopback HTTP against the FakeEngine: the response
// object and the chunk stream (reasoning_content deltas, tool-call deltas, include_usage, [DONE]),
// n choices, logprobs, vLLM's prompt_logprobs, stop strings on the answer only, max_tokens,
// response_format and thinking switches reaching the engine.
#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kReply = "Let me see.</think>Hello there!" + kEos;

std::string chat_body(const std::string& extra = "") {
  return R"({"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}])" + extra + "}";
}

TEST(ChatCompletionsTest, AnswerWithReasoningAndUsage) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/chat/completions", chat_body());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(r.headers["x-request-id"].rfind("req_", 0), 0u);
  Json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "deepseek-v4-flash");
  EXPECT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"],
            Json::parse(R"({"role": "assistant", "content": "Hello there!", "reasoning_content": "Let me see."})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["logprobs"], nullptr);
  // The prompt is exactly what /tokenize renders for the same messages.
  Json counted = parse(t.post("/tokenize", chat_body()).body);
  const int n_out = static_cast<int>(t.tokenizer->ids(kReply).size());  // 11 + 1 + 12 + EOS = 25
  EXPECT_EQ(n_out, 25);
  EXPECT_EQ(j["usage"], Json::parse("{\"prompt_tokens\": " + counted["count"].dump() + ", \"completion_tokens\": 25, " +
                                    "\"total_tokens\": " + std::to_string(counted["count"].get<int>() + 25) +
                                    ", \"prompt_tokens_details\": {\"cached_tokens\": 0}, "
                                    "\"completion_tokens_details\": {\"reasoning_tokens\": 12}}"));
  EXPECT_EQ(t.tokenizer->decode(t.engine->last_request().prompt_ids), "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>");
}

TEST(ChatCompletionsTest, StreamOfDeltasWithUsage) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"(, "stream": true, "stream_options": {"include_usage": true})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  std::vector<Json> chunks = sse_json(r.body);
  ASSERT_GE(chunks.size(), 5u);
  EXPECT_EQ(chunks.back(), "[DONE]");
  EXPECT_EQ(chunks.front()["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  std::string reasoning, content, id = chunks.front()["id"];
  for (size_t i = 0; i + 2 < chunks.size(); ++i) {
    const Json& c = chunks[i];
    EXPECT_EQ(c["id"], id);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["usage"], nullptr);
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Let me see.");
  EXPECT_EQ(content, "Hello there!");
  const Json& finish = chunks[chunks.size() - 3];
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
  const Json& usage = chunks[chunks.size() - 2];
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 25);
  EXPECT_EQ(usage["usage"]["completion_tokens_details"]["reasoning_tokens"], 12);
}

const char* kToolsField = R"(, "tools": [{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

TEST(ChatCompletionsTest, ToolCallRoundTrip) {
  TestServer t([](const std::string& prompt, int) {
    if (prompt.find("<tool_result>") != std::string::npos) return "Checked.</think>It is 21 degrees." + kEos;
    return "I need the tool.</think>" + tool_call_text("Paris");
  });
  ClientResponse first = t.post("/v1/chat/completions", chat_body(kToolsField));
  ASSERT_EQ(first.status, 200) << first.body;
  Json j = parse(first.body);
  const Json& message = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(message["content"], nullptr);
  EXPECT_EQ(message["reasoning_content"], "I need the tool.");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const Json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()), Json::parse(R"({"city": "Paris"})"));
  std::string call_id = call["id"];
  EXPECT_EQ(call_id.rfind("call_", 0), 0u);

  std::string second_body = R"({"model": "deepseek-v4-flash", "messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": null, "reasoning_content": "I need the tool.", "tool_calls": [)" +
                            call.dump() + R"(]},
      {"role": "tool", "tool_call_id": ")" + call_id + R"(", "content": "{\"temp\": 21}"}])" + kToolsField + "}";
  ClientResponse second = t.post("/v1/chat/completions", second_body);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(parse(second.body)["choices"][0]["message"]["content"], "It is 21 degrees.");
  std::string prompt = t.tokenizer->decode(t.engine->last_request().prompt_ids);
  EXPECT_NE(prompt.find("<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>"), std::string::npos);
  EXPECT_NE(prompt.find("<tool_result>{\"temp\": 21}</tool_result>"), std::string::npos);
}

TEST(ChatCompletionsTest, StreamedToolCallDeltasNeverLeakMarkup) {
  TestServer t(fixed_reply("Hmm.</think>Let me check." + tool_call_text("Lyon")));
  ClientResponse r = t.post("/v1/chat/completions", chat_body(std::string(kToolsField) + R"(, "stream": true)"));
  ASSERT_EQ(r.status, 200) << r.body;
  std::string content, arguments, name, id;
  std::string finish;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]") continue;
    const Json& choice = c["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    const Json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    const Json& tc = delta["tool_calls"][0];
    EXPECT_EQ(tc["index"], 0);
    if (tc.contains("id")) {
      id = tc["id"];
      name = tc["function"]["name"];
    }
    arguments += tc["function"]["arguments"].get<std::string>();
  }
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(Json::parse(arguments), Json::parse(R"({"city": "Lyon"})"));
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(r.body.find("DSML"), std::string::npos);
}

TEST(ChatCompletionsTest, SeveralChoicesStreamAndCollect) {
  TestServer t([](const std::string&, int sample) { return std::string("Ok.</think>") + (sample == 0 ? "A" : "B") + kEos; });
  Json j = parse(t.post("/v1/chat/completions", chat_body(R"(, "n": 2)")).body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "A");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["message"]["content"], "B");
  EXPECT_EQ(j["usage"]["completion_tokens"], 2 * 6);

  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"(, "n": 2, "stream": true)"));
  std::string content[2];
  int finishes = 0;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]") continue;
    int index = c["choices"][0]["index"];
    const Json& delta = c["choices"][0]["delta"];
    if (delta.contains("content")) content[index] += delta["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(content[0], "A");
  EXPECT_EQ(content[1], "B");
  EXPECT_EQ(finishes, 2);
}

TEST(ChatCompletionsTest, LogprobsPerToken) {
  TestServer t(fixed_reply("Ok.</think>Hi" + kEos));
  Json j = parse(t.post("/v1/chat/completions", chat_body(R"(, "logprobs": true, "top_logprobs": 2)")).body);
  const Json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 7u);  // O k . </think> H i EOS
  EXPECT_EQ(content[4], Json::parse(R"({"token": "H", "logprob": -0.25, "bytes": [72],
      "top_logprobs": [{"token": "H", "logprob": -0.25, "bytes": [72]}, {"token": "I", "logprob": -1.25, "bytes": [73]}]})"));
  EXPECT_EQ(t.engine->last_request().sampling.logprobs, 2);

  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"(, "logprobs": true, "stream": true)"));
  size_t n_entries = 0;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]" || !c["choices"][0]["logprobs"].is_object()) continue;
    n_entries += c["choices"][0]["logprobs"]["content"].size();
    // Never on the role chunk that opens the stream: on chunks with text, or the finishing one.
    const Json& delta = c["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("role") && delta.value("content", "").empty() &&
                 delta.value("reasoning_content", "").empty())
        << c.dump();
  }
  EXPECT_EQ(n_entries, 7u);
}

// vLLM's prompt_logprobs extension over the rendered template's tokens: a top-level list, null
// first, then the token and its alternatives keyed by id (the FakeEngine's made-up values: token i
// at -0.5 i, rank i + 1, alternatives "a", "b", ...). Streamed, it rides once on a chunk; without
// the field there is none (as /v1/completions); out-of-range or non-integer values are 400s.
TEST(ChatCompletionsTest, PromptLogprobsExtension) {
  TestServer t(fixed_reply("Ok.</think>Hi" + kEos));
  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"(, "prompt_logprobs": 1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = parse(r.body);
  const std::vector<int32_t> prompt = t.engine->last_request().prompt_ids;
  EXPECT_EQ(t.engine->last_request().sampling.prompt_logprobs, 1);
  const Json& lps = j["prompt_logprobs"];
  ASSERT_EQ(lps.size(), prompt.size()) << j.dump();  // <BOS> <User> H i <Assistant> <think>
  EXPECT_EQ(lps[0], nullptr);
  EXPECT_EQ(lps[1][std::to_string(prompt[1])]["decoded_token"], "<｜User｜>");
  EXPECT_EQ(lps[2], Json::parse(R"({"1097": {"logprob": -0.125, "rank": 1, "decoded_token": "a"},
                                    "1072": {"logprob": -1.0, "rank": 3, "decoded_token": "H"}})"));
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(j["choices"][0]["logprobs"], nullptr);

  Json plain = parse(t.post("/v1/chat/completions", chat_body()).body);
  EXPECT_FALSE(plain.contains("prompt_logprobs")) << plain.dump();
  EXPECT_FALSE(t.engine->last_request().sampling.prompt_logprobs.has_value());

  ClientResponse streamed = t.post("/v1/chat/completions", chat_body(R"(, "prompt_logprobs": 0, "n": 2, "stream": true)"));
  int with_list = 0;
  for (const Json& c : sse_json(streamed.body)) {
    if (c == "[DONE]" || !c.contains("prompt_logprobs")) continue;
    ++with_list;
    ASSERT_EQ(c["prompt_logprobs"].size(), prompt.size()) << c.dump();
    EXPECT_EQ(c["prompt_logprobs"][2], Json::parse(R"({"1072": {"logprob": -1.0, "rank": 3, "decoded_token": "H"}})"));
  }
  EXPECT_EQ(with_list, 1) << streamed.body;

  for (const char* bad : {"21", "-1", "1.5", "\"2\"", "4294967296"}) {
    ClientResponse e = t.post("/v1/chat/completions", chat_body(std::string(R"(, "prompt_logprobs": )") + bad));
    EXPECT_EQ(e.status, 400) << bad;
    EXPECT_NE(e.body.find("prompt_logprobs"), std::string::npos) << e.body;
  }
}

TEST(ChatCompletionsTest, StopStringsCutTheAnswerButNotTheReasoning) {
  TestServer t(fixed_reply("Say there.</think>Hello there!" + kEos));
  Json j = parse(t.post("/v1/chat/completions", chat_body(R"(, "stop": ["there"])")).body);
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "Say there.");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(t.engine->last_request().sampling.stop.empty());

  ClientResponse r = t.post("/v1/chat/completions", chat_body(R"(, "stop": "lo t", "stream": true)"));
  std::string content;
  for (const Json& c : sse_json(r.body)) {
    if (c != "[DONE]" && c["choices"][0]["delta"].contains("content")) content += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Hel");
}

TEST(ChatCompletionsTest, MaxTokensEndsWithLength) {
  TestServer t(fixed_reply(kReply));
  Json j = parse(t.post("/v1/chat/completions", chat_body(R"(, "max_completion_tokens": 5)")).body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "Let m");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(t.engine->last_request().sampling.max_tokens, 5);
}

TEST(ChatCompletionsTest, SamplingFieldsAndFormatsReachTheEngine) {
  TestServer t(fixed_reply("Ok.</think>{}" + kEos));
  ClientResponse sent = t.post("/v1/chat/completions", chat_body(R"(, "temperature": 0, "top_p": 0.5, "top_k": 7,
      "min_p": 0.1, "seed": 42, "presence_penalty": 0.5, "frequency_penalty": 0.25, "repetition_penalty": 1.1,
      "bad_words": ["darn", "heck it"], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})"));
  ASSERT_EQ(sent.status, 200) << sent.body;
  Request r = t.engine->last_request();
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.25f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.bad_words, (std::vector<std::string>{"darn", "heck it"}));  // vLLM's extension
  ASSERT_TRUE(r.structured_output.has_value());
  EXPECT_EQ(r.structured_output->kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.structured_output->spec, R"({"type":"object"})");
  EXPECT_EQ(r.request_label.rfind("req_", 0), 0u);

  ClientResponse bad_word = t.post("/v1/chat/completions", chat_body(R"(, "bad_words": ["ok", 3])"));
  EXPECT_EQ(bad_word.status, 400);
  EXPECT_NE(bad_word.body.find("bad_words[1]"), std::string::npos) << bad_word.body;
  ASSERT_EQ(t.post("/v1/chat/completions", chat_body(R"(, "response_format": {"type": "json_object"})")).status, 200);
  EXPECT_EQ(t.engine->last_request().structured_output->kind, StructuredOutput::Kind::kJsonObject);
}

TEST(ChatCompletionsTest, ThinkingSwitches) {
  TestServer t(fixed_reply("Plain answer." + kEos));
  Json j = parse(t.post("/v1/chat/completions", chat_body(R"(, "thinking": {"type": "disabled"})")).body);
  EXPECT_EQ(j["choices"][0]["message"], Json::parse(R"({"role": "assistant", "content": "Plain answer."})"));
  std::string prompt = t.tokenizer->decode(t.engine->last_request().prompt_ids);
  EXPECT_EQ(prompt.substr(prompt.size() - 8), "</think>");  // chat mode closes the think block

  t.post("/v1/chat/completions", chat_body(R"(, "reasoning_effort": "max")"));
  prompt = t.tokenizer->decode(t.engine->last_request().prompt_ids);
  EXPECT_EQ(prompt.substr(prompt.size() - 7), "<think>");
}

TEST(ChatCompletionsTest, ClientRequestIdIsEchoed) {
  TestServer t(fixed_reply(kReply));
  ClientResponse r = t.post("/v1/chat/completions", chat_body(), {"X-Request-Id: my-trace-42"});
  EXPECT_EQ(r.headers["x-request-id"], "my-trace-42");
  EXPECT_EQ(t.engine->last_request().request_label, "my-trace-42");
}

}  // namespace
}  // namespace deepinfer::server::testing

namespace deepinfer::server::testing {
namespace {

// Image parts (V4.1): data URLs reach the engine as Request::images, one per placeholder in the
// rendered prompt, in order; a URL the server would have to fetch is refused with a 400.
TEST(ChatCompletionsTest, ImagePartsReachTheEngine) {
  FakeEngine::Options engine;
  engine.family = "deepseek_v41";
  TestServer t(fixed_reply("Ok." + kEos), quiet_options(), engine);
  auto body = [](const std::string& url) {
    return R"({"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": [
      {"type": "text", "text": "What is this?"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
      {"type": "image_url", "image_url": {"url": ")" + url + R"("}}]}]})";
  };
  ClientResponse r = t.post("/v1/chat/completions", body("data:image/jpeg;base64,/9j/"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Request sent = t.engine->last_request();
  ASSERT_EQ(sent.images.size(), 2u);
  EXPECT_EQ(sent.images[0].data, std::string("\x89PNG", 4));
  EXPECT_EQ(sent.images[1].data, std::string("\xff\xd8\xff", 3));
  const std::string prompt = t.tokenizer->decode(sent.prompt_ids);
  EXPECT_NE(prompt.find("What is this?\n\n<｜deepseek_image｜>\n\n<｜deepseek_image｜>"), std::string::npos) << prompt;
  ClientResponse bad = t.post("/v1/chat/completions", body("https://example.com/cat.png"));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("image 1: only data URLs"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace deepinfer::server::testing

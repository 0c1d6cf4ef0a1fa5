// Bad input gets a 4xx JSON error in the format of the API it was sent to, and the server stays
// up: malformed JSON, wrong types, invalid UTF-8, unknown model / path / method, bodies over the
// limit (with and without Expect: 100-continue), malformed HTTP, missing API key, prompts over
// the context limit, and admission (429 with Retry-After) while the engine is busy.
#include <thread>

#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kReply = "Ok.</think>Fine." + kEos;

void expect_openai_error(const ClientResponse& r, int status, const std::string& message_part) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  Json j = Json::parse(r.body);
  ASSERT_TRUE(j["error"].is_object()) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(message_part), std::string::npos) << r.body;
  EXPECT_TRUE(j["error"]["type"].is_string());
}

void expect_anthropic_error(const ClientResponse& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], type) << r.body;
}

TEST(BadInputTest, MalformedJsonAndTypes) {
  TestServer t(fixed_reply(kReply));
  expect_openai_error(t.post("/v1/chat/completions", "{\"messages\": [}"), 400, "invalid JSON body");
  expect_openai_error(t.post("/v1/chat/completions", ""), 400, "a JSON object is required");
  expect_openai_error(t.post("/v1/chat/completions", "[1, 2]"), 400, "expected a JSON object");
  ClientResponse wrong_type = t.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})");
  expect_openai_error(wrong_type, 400, "messages[0].content: expected a string or an array of content parts");
  EXPECT_EQ(Json::parse(wrong_type.body)["error"]["param"], "messages[0].content");
  expect_openai_error(t.post("/v1/chat/completions", R"({"messages": [], "temperature": "hot"})"), 400, "temperature");
  expect_openai_error(t.post("/v1/chat/completions", R"({"messages": [], "top_p": 7})"), 400, "top_p");
  expect_openai_error(t.post("/v1/completions", R"({"prompt": [1, -4]})"), 400, "prompt[1]");
  expect_openai_error(t.post("/v1/completions", R"({"prompt": ["a", {"b": 1}]})"), 400, "prompt[1]");
  expect_anthropic_error(t.post("/v1/messages", R"({"messages": [{"role": "user", "content": "x"}]})"), 400,
                         "invalid_request_error");
  expect_anthropic_error(t.post("/v1/messages", "not json"), 400, "invalid_request_error");
  EXPECT_EQ(t.get("/health").status, 200);
}

// An empty conversation is refused by both APIs (OpenAI: messages too short; Anthropic: at least
// one message), not generated from the template alone; a system prompt alone is no conversation
// for Anthropic.
TEST(BadInputTest, EmptyMessages) {
  TestServer t(fixed_reply(kReply));
  ClientResponse chat = t.post("/v1/chat/completions", R"({"messages": []})");
  expect_openai_error(chat, 400, "at least one message");
  EXPECT_EQ(Json::parse(chat.body)["error"]["param"], "messages");
  expect_anthropic_error(t.post("/v1/messages", R"({"max_tokens": 5, "messages": []})"), 400, "invalid_request_error");
  expect_anthropic_error(t.post("/v1/messages", R"({"max_tokens": 5, "system": "Be brief.", "messages": []})"), 400,
                         "invalid_request_error");
  EXPECT_EQ(t.post("/v1/chat/completions", R"({"messages": [{"role": "system", "content": "Be brief."}]})").status, 200);
  EXPECT_EQ(t.engine->n_live_requests(), 0);
}

TEST(BadInputTest, InvalidUtf8IsRefused) {
  TestServer t(fixed_reply(kReply));
  std::string body = "{\"messages\": [{\"role\": \"user\", \"content\": \"bad \xC3\x28 byte\"}]}";
  expect_openai_error(t.post("/v1/chat/completions", body), 400, "invalid JSON body");
  std::string anthropic = "{\"max_tokens\": 5, \"messages\": [{\"role\": \"user\", \"content\": \"\xFF\"}]}";
  expect_anthropic_error(t.post("/v1/messages", anthropic), 400, "invalid_request_error");
  EXPECT_EQ(t.engine->n_live_requests(), 0);
}

TEST(BadInputTest, UnknownModelPathAndMethod) {
  TestServer t(fixed_reply(kReply));
  ClientResponse model = t.post("/v1/chat/completions", R"({"model": "gpt-9", "messages": []})");
  expect_openai_error(model, 404, "gpt-9");
  EXPECT_EQ(Json::parse(model.body)["error"]["code"], "model_not_found");
  EXPECT_EQ(Json::parse(model.body)["error"]["type"], "invalid_request_error");  // OpenAI's type
  expect_anthropic_error(t.post("/v1/messages", R"({"model": "claude", "max_tokens": 5, "messages": []})"), 404,
                         "not_found_error");
  expect_openai_error(t.post("/v1/nothing", "{}"), 404, "Unknown path /v1/nothing");
  expect_openai_error(t.get("/v1/chat/completions"), 405, "not allowed");
  expect_openai_error(t.get("/v1/models/other"), 404, "other");
}

TEST(BadInputTest, BodyOverTheLimit) {
  ServerOptions o = quiet_options();
  o.http.max_body_bytes = 1000;
  TestServer t(fixed_reply(kReply), o);
  std::string big = R"({"messages": [{"role": "user", "content": ")" + std::string(5000, 'a') + "\"}]}";
  ClientResponse r = t.post("/v1/chat/completions", big);
  expect_openai_error(r, 413, "exceeds the limit of 1000 bytes");
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "request_too_large");
  expect_anthropic_error(t.post("/v1/messages", big), 413, "request_too_large");

  // A huge declared body is refused before it is uploaded (Expect: 100-continue or not).
  HttpClient c(t.port);
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n"
             "Expect: 100-continue\r\n\r\n");
  auto early = c.read_response(5000);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->status, 413);
  EXPECT_EQ(early->headers["connection"], "close");
  EXPECT_EQ(t.get("/health").status, 200);
}

TEST(BadInputTest, MalformedHttp) {
  TestServer t(fixed_reply(kReply));
  {
    HttpClient c(t.port);
    c.send_raw("THIS IS NOT HTTP\r\n\r\n");
    auto r = c.read_response(5000);
    ASSERT_TRUE(r.has_value());
    expect_openai_error(*r, 400, "malformed HTTP request");
  }
  {
    HttpClient c(t.port);
    c.send_raw("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'b') + "\r\n\r\n");
    auto r = c.read_response(5000);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 431);
  }
  {
    HttpClient c(t.port);  // a client that sends half a request and hangs up
    c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"mess");
  }
  EXPECT_EQ(t.get("/health").status, 200);
}

TEST(BadInputTest, ApiKey) {
  ServerOptions o = quiet_options();
  o.api_key = "sekret";
  TestServer t(fixed_reply(kReply), o);
  const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}]})";
  ClientResponse missing = t.post("/v1/chat/completions", body);
  expect_openai_error(missing, 401, "API key");
  EXPECT_EQ(Json::parse(missing.body)["error"]["type"], "invalid_request_error");  // OpenAI's type and code
  EXPECT_EQ(Json::parse(missing.body)["error"]["code"], "invalid_api_key");
  expect_openai_error(t.post("/v1/chat/completions", body, {"Authorization: Bearer wrong"}), 401, "API key");
  expect_anthropic_error(t.post("/v1/messages", R"({"max_tokens": 5, "messages": []})"), 401, "authentication_error");
  EXPECT_EQ(t.post("/v1/chat/completions", body, {"Authorization: Bearer sekret"}).status, 200);
  EXPECT_EQ(t.post("/v1/messages", R"({"max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]})",
                   {"x-api-key: sekret"}).status, 200);
  EXPECT_EQ(t.get("/health").status, 200);  // open
  EXPECT_EQ(t.get("/metrics").status, 200);
  EXPECT_EQ(t.get("/v1/models").status, 401);
}

TEST(BadInputTest, PromptOverTheContextLimit) {
  FakeEngine::Options eo;
  eo.max_model_len = 64;
  TestServer t(fixed_reply(kReply), quiet_options(), eo);
  std::string long_prompt = R"({"messages": [{"role": "user", "content": ")" + std::string(100, 'x') + "\"}]}";
  expect_openai_error(t.post("/v1/chat/completions", long_prompt), 400, "maximum context length is 64 tokens");
  ClientResponse too_many = t.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 60})");
  expect_openai_error(too_many, 400, "60 to generate");
  EXPECT_EQ(Json::parse(too_many.body)["error"]["param"], "max_tokens");
  EXPECT_EQ(Json::parse(too_many.body)["error"]["code"], "context_length_exceeded");
  expect_anthropic_error(t.post("/v1/messages", R"({"max_tokens": 5, "messages": [{"role": "user", "content": ")" +
                                                    std::string(100, 'x') + "\"}]}"),
                         400, "invalid_request_error");
  EXPECT_EQ(t.engine->n_live_requests(), 0);
}

TEST(BadInputTest, AdmissionBoundAnswers429) {
  ServerOptions o = quiet_options();
  o.max_in_flight = 2;
  TestServer t(fixed_reply(kReply), o);
  t.engine->set_paused(true);
  const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})";
  HttpClient a(t.port), b(t.port);
  a.send_request("POST", "/v1/chat/completions", body);
  b.send_request("POST", "/v1/chat/completions", body);
  for (int i = 0; i < 500 && t.engine->n_live_requests() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(t.engine->n_live_requests(), 2);
  ClientResponse refused = t.post("/v1/chat/completions", body);
  expect_openai_error(refused, 429, "Too many requests in flight (limit 2)");
  EXPECT_EQ(refused.headers["retry-after"], "1");
  expect_anthropic_error(t.post("/v1/messages", R"({"max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]})"),
                         429, "rate_limit_error");
  t.engine->set_paused(false);
  EXPECT_EQ(a.read_response()->status, 200);
  EXPECT_EQ(b.read_response()->status, 200);
  EXPECT_EQ(t.post("/v1/chat/completions", body).status, 200);
  EXPECT_NE(t.get("/metrics").body.find("deepinfer_requests_rejected_total{reason=\"queue_full\"} 2"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::server::testing

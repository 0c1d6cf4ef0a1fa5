// Shared set-up of the server tests: an ApiServer on an ephemeral loopback port in front of a
// FakeEngine whose replies are scripted as text (special tokens spelled out, tokenized with the
// chat tests' FakeTokenizer), plus JSON helpers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../chat/fake_tokenizer.h"
#include "api_server.h"
#include "server_context.h"
#include "fake_engine.h"
#include "http_client.h"
#include "protocol/chat_request.h"

namespace deepinfer::server::testing {

using protocol::Json;

inline const std::string kEos = "<｜end▁of▁sentence｜>";

// A DSML tool call get_weather(city=<city>) as V4 writes it, ending the turn.
inline std::string tool_call_text(const std::string& city) {
  return "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
         "string=\"true\">" + city + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;
}

inline ServerOptions quiet_options() {
  ServerOptions o;
  o.http.port = 0;
  o.http.n_threads = 2;
  o.access_log = false;
  o.served_model_names = {"deepseek-v4-flash"};
  o.shutdown_timeout_s = 5;
  return o;
}

class TestServer {
 public:
  // `reply(prompt_text, sample)` returns the model output text for a request.
  using Reply = std::function<std::string(const std::string& prompt_text, int sample)>;

  explicit TestServer(Reply reply, ServerOptions options = quiet_options(), FakeEngine::Options engine_options = {})
      : tokenizer(std::make_shared<chat::testing::FakeTokenizer>()) {
    auto tok = tokenizer;
    engine = std::make_unique<FakeEngine>(tokenizer, engine_options, [tok, reply](const Request& r, int sample) {
      return tok->ids(reply(tok->decode(r.prompt_ids), sample));
    });
    auto s = ApiServer::start(*engine, std::move(options));
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    if (s.is_ok()) server = std::move(s).value();
    port = server ? server->port() : 0;
  }
  ~TestServer() {
    if (server) server->shutdown();
    engine->shutdown(false);
  }

  ClientResponse post(const std::string& path, const std::string& body, const std::vector<std::string>& headers = {}) {
    return http_request(port, "POST", path, body, headers);
  }
  ClientResponse get(const std::string& path, const std::vector<std::string>& headers = {}) {
    return http_request(port, "GET", path, "", headers);
  }

  std::shared_ptr<chat::testing::FakeTokenizer> tokenizer;
  std::unique_ptr<FakeEngine> engine;
  std::unique_ptr<ApiServer> server;
  int port = 0;
};

inline TestServer::Reply fixed_reply(std::string text) {
  return [text](const std::string&, int) { return text; };
}

inline Json parse(const std::string& text) { return Json::parse(text); }

// The data members of an SSE body, parsed as JSON ("[DONE]" kept as the string "[DONE]").
inline std::vector<Json> sse_json(const std::string& body) {
  std::vector<Json> out;
  for (const SseEvent& e : parse_sse(body)) out.push_back(e.data == "[DONE]" ? Json("[DONE]") : Json::parse(e.data));
  return out;
}

}  // namespace deepinfer::server::testing

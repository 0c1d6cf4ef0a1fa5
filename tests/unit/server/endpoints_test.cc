// GET /v1/models, /health, /metrics and POST /tokenize, /detokenize.
#include <chrono>
#include <thread>

#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kReply = "Ok.</think>Fine." + kEos;

TEST(EndpointsTest, ModelsAndHealth) {
  ServerOptions o = quiet_options();
  o.served_model_names = {"deepseek-v4-flash", "dsv4"};
  TestServer t(fixed_reply(kReply), o);
  Json list = parse(t.get("/v1/models").body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][1]["id"], "dsv4");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(list["data"][0]["max_model_len"], 4096);
  EXPECT_EQ(parse(t.get("/v1/models/dsv4").body)["id"], "dsv4");
  EXPECT_EQ(t.post("/v1/chat/completions", R"({"model": "dsv4", "messages": [{"role": "user", "content": "x"}]})").status, 200);
  ClientResponse health = t.get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(parse(health.body), Json::parse(R"({"status": "ok"})"));
}

TEST(EndpointsTest, MetricsAfterTraffic) {
  TestServer t(fixed_reply(kReply));
  for (int i = 0; i < 3; ++i) t.post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})");
  t.post("/v1/chat/completions", "{");
  // A request's counters move just after its response is queued (the exchange's completion, the
  // generation's end on its io thread), so a client may read /metrics a moment before: wait for
  // the last request's counter first (the test failed so under load).
  ClientResponse r;
  for (int i = 0; i < 400; ++i) {
    r = t.get("/metrics");
    if (r.body.find("deepinfer_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1\n") !=
            std::string::npos &&
        r.body.find("deepinfer_request_success_total{finished_reason=\"stop\"} 3\n") != std::string::npos &&
        r.body.find("deepinfer_requests_in_flight 0\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  const std::string& m = r.body;
  for (const char* line :
       {"deepinfer_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 3\n",
        "deepinfer_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1\n",
        "deepinfer_request_success_total{finished_reason=\"stop\"} 3\n",
        "deepinfer_generation_tokens_total 30\n",
        "deepinfer_time_to_first_token_seconds_count 3\n",
        "deepinfer_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3\n",
        "deepinfer_request_generation_tokens_bucket{le=\"5\"} 0\n",
        "deepinfer_request_generation_tokens_bucket{le=\"10\"} 3\n",
        "deepinfer_requests_in_flight 0\n", "deepinfer_requests_in_flight_limit 4096\n",
        "deepinfer_kv_cache_usage_ratio 0\n", "deepinfer_prefix_cache_hit_rate 0\n",
        "# TYPE deepinfer_time_per_output_token_seconds histogram\n",
        "# TYPE deepinfer_engine_step_seconds_total counter\n",
        "deepinfer_engine_step_seconds_total{phase=\"forward\"} 0\n",
        "deepinfer_engine_step_seconds_total{phase=\"emit\"} 0\n",
        "# TYPE deepinfer_spec_decode_num_accepted_tokens_total counter\n",
        "deepinfer_spec_decode_num_draft_tokens_total 0\n"}) {
    EXPECT_NE(m.find(line), std::string::npos) << line;
  }
}

// CORS, as vLLM answers browsers by default (any origin): the allow-origin header on replies and
// streams to a request with an Origin, preflights answered without credentials; a list of
// origins echoes the allowed one (with Vary) and ignores the others.
TEST(EndpointsTest, CorsForBrowserClients) {
  ServerOptions o = quiet_options();
  o.api_key = "sekret";
  TestServer t(fixed_reply(kReply), o);
  const std::string origin = "Origin: https://ui.example";
  ClientResponse models = t.get("/v1/models", {origin, "Authorization: Bearer sekret"});
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(t.get("/v1/models", {"Authorization: Bearer sekret"}).headers.count("access-control-allow-origin"), 0u);
  ClientResponse preflight = http_request(t.port, "OPTIONS", "/v1/chat/completions", "",
                                          {origin, "Access-Control-Request-Method: POST",
                                           "Access-Control-Request-Headers: authorization, content-type"});
  EXPECT_EQ(preflight.status, 204);
  EXPECT_EQ(preflight.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(preflight.headers["access-control-allow-headers"], "authorization, content-type");
  EXPECT_NE(preflight.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  ClientResponse stream = t.post("/v1/chat/completions",
                                 R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})",
                                 {origin, "Authorization: Bearer sekret"});
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(t.post("/v1/chat/completions", "{}", {origin}).headers["access-control-allow-origin"], "*");  // 401 too

  ServerOptions listed = quiet_options();
  listed.allowed_origins = {"https://ui.example"};
  TestServer l(fixed_reply(kReply), listed);
  ClientResponse ok = l.get("/health", {origin});
  EXPECT_EQ(ok.headers["access-control-allow-origin"], "https://ui.example");
  EXPECT_EQ(ok.headers["vary"], "Origin");
  EXPECT_EQ(l.get("/health", {"Origin: https://evil.example"}).headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(http_request(l.port, "OPTIONS", "/v1/chat/completions", "", {"Origin: https://evil.example"}).status, 405);

  ServerOptions none = quiet_options();
  none.allowed_origins.clear();
  TestServer n(fixed_reply(kReply), none);
  EXPECT_EQ(n.get("/health", {origin}).headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(http_request(n.port, "OPTIONS", "/v1/chat/completions", "", {origin}).status, 405);
}

TEST(EndpointsTest, TokenizeAndDetokenize) {
  TestServer t(fixed_reply(kReply));
  Json tok = parse(t.post("/tokenize", R"({"prompt": "Hi"})").body);
  EXPECT_EQ(tok, Json::parse(R"({"count": 3, "max_model_len": 4096, "tokens": [0, 1072, 1105]})"));
  Json raw = parse(t.post("/tokenize", R"({"prompt": "<｜User｜>Hi", "add_special_tokens": false})").body);
  EXPECT_EQ(raw["tokens"], Json::parse("[128803, 1072, 1105]"));
  Json chat = parse(t.post("/tokenize", R"({"messages": [{"role": "user", "content": "Hi"}]})").body);
  EXPECT_EQ(t.tokenizer->decode(chat["tokens"].get<std::vector<int32_t>>()),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>");
  EXPECT_EQ(parse(t.post("/detokenize", R"({"tokens": [1072, 1105]})").body), Json::parse(R"({"prompt": "Hi"})"));
  EXPECT_EQ(t.post("/detokenize", R"({"tokens": [-1]})").status, 400);
  EXPECT_EQ(t.post("/detokenize", R"({"tokens": [999999999]})").status, 400);
  EXPECT_EQ(t.post("/detokenize", R"({"tokens": ["a"]})").status, 400);
  // A model name of another type is a 400 naming it (it threw out of the JSON library: a 500).
  for (const char* path : {"/tokenize", "/detokenize"}) {
    ClientResponse bad = t.post(path, R"({"model": 5, "prompt": "Hi", "tokens": [1]})");
    EXPECT_EQ(bad.status, 400) << path << ": " << bad.body;
    EXPECT_NE(bad.body.find("model: expected a string"), std::string::npos) << bad.body;
  }
  // A lone byte of a multi-byte character comes back as U+FFFD, never as invalid JSON.
  EXPECT_EQ(parse(t.post("/detokenize", R"({"tokens": [1195]})").body)["prompt"], "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace deepinfer::server::testing

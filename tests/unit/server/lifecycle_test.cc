// Behaviour under real conditions: a client that disconnects mid-stream (or while its request is
// still queued) aborts the engine request and frees its KV; graceful shutdown lets in-flight
// streams finish, refuses new work and aborts what exceeds the timeout; a bounded load test
// (hundreds of concurrent streams) ends with no live request, no KV block, no connection and no
// extra thread left.
#include <dirent.h>

#include <atomic>
#include <thread>

#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kStreamBody = R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})";

// A reply long enough to still be streaming when the test acts.
std::string long_reply() { return "Ok.</think>" + std::string(5000, 'z') + kEos; }

template <typename Pred>
bool eventually(Pred pred, int timeout_ms = 5000) {
  for (int waited = 0; waited < timeout_ms; waited += 5) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

int n_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(LifecycleTest, DisconnectMidStreamAbortsAndFreesKv) {
  FakeEngine::Options eo;
  eo.step_ms = 2;
  TestServer t(fixed_reply(long_reply()), quiet_options(), eo);
  {
    HttpClient c(t.port);
    c.send_request("POST", "/v1/chat/completions", kStreamBody);
    int pieces = 0;
    auto head = c.read_streaming([&](const std::string&) { return ++pieces < 20; });
    ASSERT_TRUE(head.has_value());
    EXPECT_EQ(head->status, 200);
    EXPECT_GT(t.engine->n_blocks_in_use(), 0);
  }  // hang up mid-stream
  EXPECT_TRUE(eventually([&] { return t.engine->n_live_requests() == 0; }));
  EXPECT_EQ(t.engine->n_blocks_in_use(), 0);
  EXPECT_EQ(t.engine->n_aborted(), 1);
  EXPECT_TRUE(eventually([&] { return t.server->context().admission.in_flight() == 0; }));
  EXPECT_EQ(t.server->context().metrics.n_client_disconnects(), 1u);
  EXPECT_TRUE(eventually([&] { return t.server->n_connections() == 0; }));
  EXPECT_EQ(t.get("/health").status, 200);
}

TEST(LifecycleTest, DisconnectWhileQueuedOrNonStreaming) {
  TestServer t(fixed_reply(long_reply()));
  t.engine->set_paused(true);  // as if the prompt were still in prefill
  {
    HttpClient queued(t.port), waiting(t.port);
    queued.send_request("POST", "/v1/chat/completions", kStreamBody);
    waiting.send_request("POST", "/v1/messages", R"({"max_tokens": 2000, "messages": [{"role": "user", "content": "Hi"}]})");
    ASSERT_TRUE(eventually([&] { return t.engine->n_live_requests() == 2; }));
  }
  EXPECT_TRUE(eventually([&] { return t.engine->n_live_requests() == 0; }));
  EXPECT_EQ(t.engine->n_aborted(), 2);
  EXPECT_EQ(t.engine->n_blocks_in_use(), 0);
  EXPECT_TRUE(eventually([&] { return t.server->context().admission.in_flight() == 0; }));
}

TEST(LifecycleTest, ShutdownDrainsInFlightStreams) {
  FakeEngine::Options eo;
  eo.step_ms = 2;
  TestServer t(fixed_reply("Ok.</think>" + std::string(200, 'y') + kEos), quiet_options(), eo);
  HttpClient c(t.port);
  c.send_request("POST", "/v1/chat/completions", kStreamBody);
  ASSERT_TRUE(eventually([&] { return t.engine->n_live_requests() == 1; }));
  std::thread stopper([&] { t.server->shutdown(); });
  auto r = c.read_response(10000);
  stopper.join();
  ASSERT_TRUE(r.has_value());
  std::vector<Json> chunks = sse_json(r->body);
  EXPECT_EQ(chunks.back(), "[DONE]");
  EXPECT_EQ(chunks[chunks.size() - 2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r->headers["connection"], "keep-alive");
  EXPECT_EQ(t.engine->n_aborted(), 0);
  EXPECT_EQ(t.server->n_connections(), 0u);
  HttpClient late(t.port);
  EXPECT_FALSE(late.send_request("GET", "/health", "") && late.read_response(500).has_value());
}

TEST(LifecycleTest, ShutdownTimeoutAbortsWithAnErrorEvent) {
  ServerOptions o = quiet_options();
  o.shutdown_timeout_s = 0.2;
  TestServer t(fixed_reply(long_reply()), o);
  t.engine->set_paused(true);
  HttpClient c(t.port);
  c.send_request("POST", "/v1/chat/completions", kStreamBody);
  ASSERT_TRUE(eventually([&] { return t.engine->n_live_requests() == 1; }));
  EXPECT_EQ(t.server->shutdown(), 1u);
  auto r = c.read_response(5000);
  ASSERT_TRUE(r.has_value());
  std::vector<Json> chunks = sse_json(r->body);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_NE(chunks[chunks.size() - 2]["error"]["message"].get<std::string>().find("shutting down"), std::string::npos);
  EXPECT_EQ(t.engine->n_live_requests(), 0);
  EXPECT_EQ(t.engine->n_blocks_in_use(), 0);
}

// Hundreds of concurrent streams over the fake engine's continuous batching; every tenth client
// hangs up on an endless answer, the others must complete with their [DONE], and afterwards
// nothing may be left behind.
TEST(LifecycleTest, BoundedLoadLeavesNothingBehind) {
  constexpr int kStreams = 300;
  FakeEngine::Options eo;
  eo.step_ms = 2;
  TestServer t([](const std::string& prompt, int) {
    return prompt.find("long") != std::string::npos ? long_reply() : "Ok.</think>" + std::string(40, 'w') + kEos;
  }, quiet_options(), eo);
  const std::string long_body = R"({"messages": [{"role": "user", "content": "long"}], "stream": true})";
  ASSERT_EQ(t.get("/health").status, 200);
  const int threads_before = n_threads();
  std::atomic<int> n_ok{0}, n_cancelled{0};
  {
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (int i = 0; i < kStreams; ++i) {
      clients.push_back(std::make_unique<HttpClient>(t.port));
      ASSERT_TRUE(clients.back()->send_request("POST", "/v1/chat/completions", i % 10 == 9 ? long_body : kStreamBody));
    }
    std::vector<std::thread> readers;
    for (int k = 0; k < 4; ++k) {
      readers.emplace_back([&, k] {
        for (int i = k; i < kStreams; i += 4) {
          if (i % 10 == 9) {  // every tenth client walks away after a few chunks
            int pieces = 0;
            clients[i]->read_streaming([&](const std::string&) { return ++pieces < 3; });
            clients[i]->close();
            ++n_cancelled;
            continue;
          }
          auto r = clients[i]->read_response(30000);
          if (r && r->status == 200 && r->body.find("data: [DONE]") != std::string::npos) ++n_ok;
        }
      });
    }
    for (auto& r : readers) r.join();
  }
  EXPECT_EQ(n_ok.load(), kStreams - kStreams / 10);
  EXPECT_EQ(n_cancelled.load(), kStreams / 10);
  EXPECT_TRUE(eventually([&] { return t.engine->n_live_requests() == 0; }, 10000));
  EXPECT_EQ(t.engine->n_aborted(), kStreams / 10);
  EXPECT_EQ(t.engine->n_blocks_in_use(), 0);
  EXPECT_DOUBLE_EQ(t.engine->stats().kv_usage, 0.0);
  EXPECT_TRUE(eventually([&] { return t.server->context().admission.in_flight() == 0; }));
  EXPECT_TRUE(eventually([&] { return t.server->n_connections() == 0; }));
  EXPECT_EQ(t.server->context().n_generations(), 0u);
  EXPECT_EQ(n_threads(), threads_before);
  std::string metrics = t.get("/metrics").body;
  EXPECT_NE(metrics.find("deepinfer_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} " +
                         std::to_string(kStreams - kStreams / 10)),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::server::testing

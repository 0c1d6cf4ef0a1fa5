// HTTP/1.1 behaviour of the server connection: several requests (whole and streamed) on one
// keep-alive connection, chunked request bodies, Expect: 100-continue, and idle keep-alive
// connections closed by a shutdown.
#include <thread>

#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

const std::string kReply = "Ok.</think>Fine." + kEos;
const std::string kChat = R"({"messages": [{"role": "user", "content": "Hi"}]})";

TEST(HttpTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  TestServer t(fixed_reply(kReply));
  HttpClient c(t.port);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(c.send_request("GET", "/v1/models", ""));
    auto models = c.read_response(5000);
    ASSERT_TRUE(models.has_value()) << round;
    EXPECT_EQ(models->status, 200);
    EXPECT_EQ(models->headers["connection"], "keep-alive");
    // Give the readiness watch of the previous request time to fire on the next request's bytes.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(c.send_request("POST", "/v1/chat/completions", kChat));
    auto chat = c.read_response(5000);
    ASSERT_TRUE(chat.has_value()) << round;
    EXPECT_EQ(parse(chat->body)["choices"][0]["message"]["content"], "Fine.");
    ASSERT_TRUE(c.send_request("POST", "/v1/chat/completions",
                               R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})"));
    auto stream = c.read_response(5000);
    ASSERT_TRUE(stream.has_value()) << round;
    EXPECT_EQ(sse_json(stream->body).back(), "[DONE]");
  }
  EXPECT_EQ(t.server->n_connections(), 1u);
}

TEST(HttpTest, ChunkedRequestBody) {
  TestServer t(fixed_reply(kReply));
  HttpClient c(t.port);
  std::string first = kChat.substr(0, 10), rest = kChat.substr(10);
  char sizes[64];
  std::snprintf(sizes, sizeof(sizes), "%zx", first.size());
  std::string body = std::string(sizes) + "\r\n" + first + "\r\n";
  std::snprintf(sizes, sizeof(sizes), "%zx", rest.size());
  body += std::string(sizes) + "\r\n" + rest + "\r\n0\r\n\r\n";
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body);
  auto r = c.read_response(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(HttpTest, ExpectContinue) {
  TestServer t(fixed_reply(kReply));
  HttpClient c(t.port);
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
             std::to_string(kChat.size()) + "\r\n\r\n");
  auto interim = c.read_response(5000);
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  c.send_raw(kChat);
  auto r = c.read_response(5000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(HttpTest, ShutdownClosesIdleKeepAliveConnections) {
  TestServer t(fixed_reply(kReply));
  HttpClient c(t.port);
  ASSERT_TRUE(c.send_request("GET", "/health", ""));
  ASSERT_TRUE(c.read_response(5000).has_value());
  auto t0 = std::chrono::steady_clock::now();
  t.server->shutdown();
  EXPECT_TRUE(c.wait_closed(1000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(t.server->n_connections(), 0u);
}

}  // namespace
}  // namespace deepinfer::server::testing

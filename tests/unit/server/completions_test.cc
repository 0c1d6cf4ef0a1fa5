// POST /v1/completions (legacy, raw prompt) end to end against the FakeEngine: text, token-id and
// one-element-list prompts, n, echo, legacy logprobs, stop strings handled by the engine, the
// chunk stream with include_usage and [DONE].
#include <map>

#include "server_test_util.h"

namespace deepinfer::server::testing {
namespace {

TEST(CompletionsTest, TextPromptAndUsage) {
  TestServer t(fixed_reply(" world" + kEos));
  ClientResponse r = t.post("/v1/completions", R"({"model": "deepseek-v4-flash", "prompt": "Hello"})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = parse(r.body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"], Json::parse(R"([{"index": 0, "text": " world", "logprobs": null, "finish_reason": "stop"}])"));
  EXPECT_EQ(j["usage"], Json::parse(R"({"prompt_tokens": 6, "completion_tokens": 7, "total_tokens": 13,
                                         "prompt_tokens_details": {"cached_tokens": 0}})"));
  // BOS + the text tokenized with special tokens matched; default max_tokens 16.
  Request sent = t.engine->last_request();
  EXPECT_EQ(t.tokenizer->decode(sent.prompt_ids), "<｜begin▁of▁sentence｜>Hello");
  EXPECT_EQ(sent.sampling.max_tokens, 16);
}

TEST(CompletionsTest, TokenPromptsEchoAndN) {
  TestServer t([](const std::string&, int sample) { return std::string(sample == 0 ? "x" : "y") + kEos; });
  Json j = parse(t.post("/v1/completions", R"({"prompt": [[1072, 1105]], "n": 2, "echo": true})").body);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "Hix");  // FakeTokenizer byte ids: 1000 + 'H', 1000 + 'i'
  EXPECT_EQ(j["choices"][1]["text"], "Hiy");
  EXPECT_EQ(t.engine->last_request().prompt_ids, (std::vector<int32_t>{1072, 1105}));
}

// A batch of prompts (strings or token-id arrays) with n samples each: choice p * n + j is sample j
// of prompt p, as OpenAI and vLLM number them; each prompt's tokens count once in the usage.
TEST(CompletionsTest, BatchOfPrompts) {
  TestServer t([](const std::string& prompt, int sample) {
    return std::string(prompt.find("Bye") != std::string::npos ? "B" : "A") + std::to_string(sample) + kEos;
  });
  Json j = parse(t.post("/v1/completions", R"({"prompt": ["Hello", "Bye"], "n": 2, "echo": true})").body);
  ASSERT_EQ(j["choices"].size(), 4u) << j.dump();
  const char* want[] = {"HelloA0", "HelloA1", "ByeB0", "ByeB1"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], want[i]) << i;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6 + 4);  // BOS + "Hello", BOS + "Bye" (byte tokens)
  EXPECT_EQ(j["usage"]["completion_tokens"], 4 * 3);
  Json ids = parse(t.post("/v1/completions", R"({"prompt": [[1072, 1105], [1066]], "max_tokens": 5})").body);
  ASSERT_EQ(ids["choices"].size(), 2u);
  EXPECT_EQ(ids["choices"][1]["text"], "A0");
  ClientResponse r = t.post("/v1/completions", R"({"prompt": ["Hello", "Bye"], "stream": true})");
  std::map<int, std::string> streamed;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]") continue;
    streamed[c["choices"][0]["index"].get<int>()] += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, (std::map<int, std::string>{{0, "A0"}, {1, "B0"}}));
  // Bad entries name their prompt; a prompt over the context limit fails the request.
  ClientResponse bad = t.post("/v1/completions", R"({"prompt": ["ok", 5]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("prompt[1]"), std::string::npos) << bad.body;
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": ["ok", [1, -4]]})").status, 400);
  EXPECT_EQ(t.engine->n_live_requests(), 0);
}

TEST(CompletionsTest, LegacyLogprobs) {
  TestServer t(fixed_reply("ab" + kEos));
  Json j = parse(t.post("/v1/completions", R"({"prompt": "x", "logprobs": 1})").body);
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], Json::parse(R"(["a", "b", "<｜end▁of▁sentence｜>"])"));
  EXPECT_EQ(j["choices"][0]["logprobs"]["token_logprobs"], Json::parse("[-0.25, -0.25, -0.25]"));
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][0], Json::parse(R"({"a": -0.25})"));
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], Json::parse("[0, 1, 2]"));
}

TEST(CompletionsTest, StreamWithStopAndUsage) {
  TestServer t(fixed_reply("one two three" + kEos));
  ClientResponse r = t.post("/v1/completions", R"({"prompt": "count", "stream": true, "stop": [" three"],
      "max_tokens": 100, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<Json> chunks = sse_json(r.body);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i]["object"], "text_completion");
    EXPECT_EQ(chunks[i]["usage"], nullptr);
    text += chunks[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "one two");
  EXPECT_EQ(chunks[chunks.size() - 3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[chunks.size() - 2]["usage"]["completion_tokens"], 13);
  EXPECT_EQ(t.engine->last_request().sampling.stop, std::vector<std::string>{" three"});
}

TEST(CompletionsTest, LengthAndUnsupportedFields) {
  TestServer t(fixed_reply("abcdef" + kEos));
  Json j = parse(t.post("/v1/completions", R"({"prompt": "x", "max_tokens": 3})").body);
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "suffix": "y"})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "echo": true, "logprobs": 1})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "best_of": 3})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "logprobs": 21})").status, 400);
}

}  // namespace
}  // namespace deepinfer::server::testing

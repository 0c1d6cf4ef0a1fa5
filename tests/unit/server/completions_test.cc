// POST /v1/completions (legacy, raw prompt) end to end against the FakeEngine: text, token-id and
// one-element-list prompts, n, echo, legacy logprobs (with echo: the prompt's too; max_tokens 0:
// the prompt alone), vLLM's prompt_logprobs, stop strings handled by the engine, the chunk stream
// with include_usage and [DONE]. The FakeEngine makes prompt logprobs up: prompt token i has
// logprob -0.5 i, rank i + 1 and alternatives "a", "b", ... at -0.125, -0.25, ...
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

// Echo with logprobs: the prompt's tokens first (the first with null entries; BOS, which the
// echoed text does not show, takes no room), then the generated ones; the engine is asked for the
// prompt logprobs. Every choice of n starts with them, streamed or not — also when sample 1's
// events come before sample 0's, which brings them.
TEST(CompletionsTest, EchoWithLogprobsCoversThePrompt) {
  FakeEngine::Options engine_options;
  engine_options.last_sample_first = true;
  TestServer t([](const std::string&, int sample) { return std::string(sample == 0 ? "ab" : "cd") + kEos; },
               quiet_options(), engine_options);
  Json j = parse(t.post("/v1/completions", R"({"prompt": "Hi", "echo": true, "logprobs": 1, "max_tokens": 2,
                                               "n": 2})").body);
  ASSERT_EQ(j["choices"].size(), 2u) << j.dump();
  EXPECT_EQ(j["choices"][0]["text"], "Hiab");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  Json want = Json::parse(R"({"tokens": ["<｜begin▁of▁sentence｜>", "H", "i", "a", "b"],
                               "token_logprobs": [null, -0.5, -1.0, -0.25, -0.25],
                               "top_logprobs": [null, {"a": -0.125}, {"a": -0.125}, {"a": -0.25}, {"b": -0.25}],
                               "text_offset": [0, 0, 1, 2, 3]})");
  EXPECT_EQ(j["choices"][0]["logprobs"], want);
  EXPECT_EQ(j["choices"][1]["text"], "Hicd");
  EXPECT_EQ(j["choices"][1]["logprobs"]["token_logprobs"], Json::parse("[null, -0.5, -1.0, -0.25, -0.25]"));
  EXPECT_EQ(j["choices"][1]["logprobs"]["tokens"][4], "d");
  EXPECT_FALSE(j["choices"][0].contains("prompt_logprobs"));
  EXPECT_EQ(t.engine->last_request().sampling.prompt_logprobs, 1);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);

  ClientResponse r = t.post("/v1/completions", R"({"prompt": "Hi", "echo": true, "logprobs": 1, "max_tokens": 2,
                                                   "n": 2, "stream": true})");
  std::map<int, std::string> text;
  std::map<int, Json> tokens;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]") continue;
    const Json& choice = c["choices"][0];
    const int i = choice["index"].get<int>();
    if (text[i].empty()) {
      EXPECT_EQ(choice["text"].get<std::string>().rfind("Hi", 0), 0u) << c.dump();
    }
    text[i] += choice["text"].get<std::string>();
    if (!choice["logprobs"].is_null()) {
      for (const Json& tok : choice["logprobs"]["tokens"]) tokens[i].push_back(tok);
    }
  }
  EXPECT_EQ(text, (std::map<int, std::string>{{0, "Hiab"}, {1, "Hicd"}}));
  EXPECT_EQ(tokens[0], want["tokens"]);
  EXPECT_EQ(tokens[1], Json::parse(R"(["<｜begin▁of▁sentence｜>", "H", "i", "c", "d"])"));
}

// max_tokens 0 with echo (vLLM): the prompt alone, finish "length", no completion tokens — with its
// logprobs when asked; without echo it is an error.
TEST(CompletionsTest, EchoWithNoTokensReturnsThePrompt) {
  TestServer t(fixed_reply("ab" + kEos));
  Json j = parse(t.post("/v1/completions", R"({"prompt": "Hi", "echo": true, "max_tokens": 0, "logprobs": 2})").body);
  EXPECT_EQ(j["choices"][0]["text"], "Hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], Json::parse(R"(["<｜begin▁of▁sentence｜>", "H", "i"])"));
  EXPECT_EQ(j["choices"][0]["logprobs"]["top_logprobs"][2], Json::parse(R"({"a": -0.125, "b": -0.25})"));
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(t.engine->last_request().sampling.max_tokens, 1);
  Json plain = parse(t.post("/v1/completions", R"({"prompt": "Hi", "echo": true, "max_tokens": 0})").body);
  EXPECT_EQ(plain["choices"][0]["text"], "Hi");
  EXPECT_EQ(plain["choices"][0]["logprobs"], nullptr);
  EXPECT_FALSE(t.engine->last_request().sampling.prompt_logprobs.has_value());
  ClientResponse r = t.post("/v1/completions", R"({"prompt": "Hi", "echo": true, "max_tokens": 0, "stream": true})");
  std::string streamed;
  for (const Json& c : sse_json(r.body)) {
    if (c != "[DONE]") streamed += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, "Hi");
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 0})").status, 400);
}

// vLLM's prompt_logprobs extension: the choice's prompt_logprobs list, null first, then the token
// and its alternatives keyed by id; out-of-range values are 400s.
TEST(CompletionsTest, PromptLogprobsExtension) {
  TestServer t(fixed_reply("ab" + kEos));
  Json j = parse(t.post("/v1/completions", R"({"prompt": [1072, 1105, 1066], "prompt_logprobs": 1,
                                               "max_tokens": 1})").body);
  EXPECT_EQ(j["choices"][0]["prompt_logprobs"], Json::parse(R"([null,
      {"1097": {"logprob": -0.125, "rank": 1, "decoded_token": "a"}, "1105": {"logprob": -0.5, "rank": 2, "decoded_token": "i"}},
      {"1097": {"logprob": -0.125, "rank": 1, "decoded_token": "a"}, "1066": {"logprob": -1.0, "rank": 3, "decoded_token": "B"}}])"));
  EXPECT_EQ(j["choices"][0]["logprobs"], nullptr);
  EXPECT_EQ(t.engine->last_request().sampling.prompt_logprobs, 1);
  ClientResponse r = t.post("/v1/completions", R"({"prompt": [1072, 1105], "prompt_logprobs": 0, "stream": true,
                                                   "max_tokens": 2})");
  int with_list = 0;
  for (const Json& c : sse_json(r.body)) {
    if (c == "[DONE]" || !c["choices"][0].contains("prompt_logprobs")) continue;
    ++with_list;
    EXPECT_EQ(c["choices"][0]["prompt_logprobs"],
              Json::parse(R"([null, {"1105": {"logprob": -0.5, "rank": 2, "decoded_token": "i"}}])"));
  }
  EXPECT_EQ(with_list, 1);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "prompt_logprobs": 21})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "prompt_logprobs": -1})").status, 400);
  // Beyond 32 bits: refused, not wrapped round to 0 or 3.
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "prompt_logprobs": 4294967296})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "logprobs": 4294967299})").status, 400);
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
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "best_of": 3})").status, 400);
  EXPECT_EQ(t.post("/v1/completions", R"({"prompt": "x", "logprobs": 21})").status, 400);
}

}  // namespace
}  // namespace deepinfer::server::testing

// fake_serve: `deepinfer serve` with the FakeEngine (tests/unit/server) behind the real HTTP
// server and the real DeepSeek tokenizer, for the SDK conformance tests. Replies are scripted
// from the rendered prompt so a tools round trip is deterministic (a random-weight model would
// never emit a DSML tool call): a tool result -> a final answer; tools + "weather" -> a call to
// get_weather; "[[long]]" -> an endless answer (cancellation); otherwise a greeting. Thinking-mode
// prompts get a reasoning part first. Prints "listening on" like `deepinfer serve`; SIGINT/SIGTERM
// drains and exits 0.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../unit/server/fake_engine.h"
#include "api_server.h"

namespace {

using deepinfer::Request;

std::string reply_for(const std::string& prompt) {
  const std::string eos = "<｜end▁of▁sentence｜>";
  std::string think = prompt.size() >= 7 && prompt.compare(prompt.size() - 7, 7, "<think>") == 0
                          ? "I should answer briefly.</think>"
                          : "";
  size_t last_user = prompt.rfind("<｜User｜>");
  std::string turn = last_user == std::string::npos ? prompt : prompt.substr(last_user);
  if (turn.find("<tool_result>") != std::string::npos) return think + "The weather in Paris is 21 degrees and sunny." + eos;
  if (prompt.find("## Tools") != std::string::npos && turn.find("weather") != std::string::npos) {
    return think +
           "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
           "string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + eos;
  }
  if (turn.find("json please") != std::string::npos) return think + "{\"ok\": true}" + eos;
  return think + "Hello from DeepInfer!" + eos;
}

int parse_int(const char* text, int fallback) { return text != nullptr ? std::atoi(text) : fallback; }

}  // namespace

int main(int argc, char** argv) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto tokenizer = deepinfer::Tokenizer::load_default();
  if (!tokenizer.is_ok()) {
    std::fprintf(stderr, "fake_serve: %s\n", tokenizer.status().to_string().c_str());
    return 77;  // ctest: skipped (no tokenizer data)
  }
  std::shared_ptr<const deepinfer::Tokenizer> tok = *tokenizer;
  deepinfer::server::testing::FakeEngine::Options eo;
  eo.step_ms = parse_int(std::getenv("FAKE_SERVE_STEP_MS"), 1);
  eo.max_model_len = 8192;
  eo.model_dir = "/models/deepseek-v4-flash";
  // "[[long]]": 20,000 tokens of " la" (built once; tokenizing 60 KB per request would dominate).
  const std::vector<int32_t> la = tok->encode(" la", false);
  deepinfer::server::testing::FakeEngine engine(tok, eo, [tok, la](const Request& r, int) {
    std::string prompt = tok->decode(r.prompt_ids);
    size_t last_user = prompt.rfind("<｜User｜>");
    if (prompt.find("[[long]]", last_user == std::string::npos ? 0 : last_user) != std::string::npos) {
      std::vector<int32_t> ids;
      for (int i = 0; i < 20000; ++i) ids.insert(ids.end(), la.begin(), la.end());
      return ids;
    }
    return tok->encode(reply_for(prompt), /*match_special=*/true);
  });

  deepinfer::server::ServerOptions options;
  options.http.port = argc > 1 ? std::atoi(argv[1]) : 0;
  options.served_model_names = {"deepseek-v4-flash"};
  options.api_key = std::getenv("FAKE_SERVE_API_KEY") != nullptr ? std::getenv("FAKE_SERVE_API_KEY") : "";
  options.max_in_flight = parse_int(std::getenv("FAKE_SERVE_MAX_IN_FLIGHT"), 0);
  options.http.max_body_bytes = 1u << 20;
  options.access_log = std::getenv("FAKE_SERVE_QUIET") == nullptr;
  auto server = deepinfer::server::ApiServer::start(engine, options);
  if (!server.is_ok()) {
    std::fprintf(stderr, "fake_serve: %s\n", server.status().to_string().c_str());
    return 2;
  }
  std::printf("deepinfer serve: listening on http://127.0.0.1:%d (fake engine)\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->shutdown();
  engine.shutdown(false);
  return 0;
}

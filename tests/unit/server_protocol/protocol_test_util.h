// Shared pieces of the protocol round-trip tests: a fake tokenizer whose extra pieces make each
// part of a simulated model output one token, and a runner that feeds that output through the
// chat OutputParser the way the server will.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../chat/fake_tokenizer.h"
#include "deepinfer/chat.h"
#include "protocol/chat_request.h"

namespace deepinfer::protocol::testing {

inline const std::string kEos = "<｜end▁of▁sentence｜>";

inline std::shared_ptr<chat::testing::FakeTokenizer> make_tokenizer() {
  return std::make_shared<chat::testing::FakeTokenizer>(std::vector<std::string>{
      "\n\n<", "tool_calls>\n<", "invoke name=\"get_weather\">\n<",
      "parameter name=\"city\" string=\"true\">Lyon</", "parameter>\n</", "invoke>\n</",
      "tool_calls>", "Hot.", "Sunny.", "Check."});
}

// A model output with one tool call get_weather(city="Lyon"), after content "Check.".
inline std::string tool_call_output(const std::string& reasoning_prefix) {
  return reasoning_prefix + "Check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
         "<｜DSML｜parameter name=\"city\" string=\"true\">Lyon</｜DSML｜parameter>\n"
         "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos;
}

struct Run {
  std::vector<std::vector<chat::ChatEvent>> steps;  // events of each pushed id
  chat::ParsedOutput output;
  std::vector<Usage> usage;  // usage after each id
};

// Feeds `text` (specials matched) id by id through a parser configured for `request`.
inline Run run_model(const ChatRequest& request, const ResponseMeta& meta, const std::string& text,
                     int n_prompt_tokens) {
  auto tok = make_tokenizer();
  auto parser = chat::OutputParser::create(tok, parser_options(request, meta));
  EXPECT_TRUE(parser.is_ok());
  Run run;
  for (int32_t id : tok->ids(text)) {
    std::vector<chat::ChatEvent> events;
    parser->push(id, &events);
    run.steps.push_back(std::move(events));
    run.usage.push_back(usage_of(parser->output(), n_prompt_tokens));
  }
  run.output = parser->output();
  return run;
}

// All streamed objects of a run, through a streamer with on_events(events, usage).
template <typename Streamer>
std::vector<Json> stream_all(Streamer& streamer, const Run& run) {
  std::vector<Json> out;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    for (Json& j : streamer.on_events(run.steps[i], run.usage[i])) out.push_back(std::move(j));
  }
  return out;
}

inline std::vector<std::string> dumps(const std::vector<Json>& values) {
  std::vector<std::string> out;
  for (const Json& v : values) out.push_back(v.dump());
  return out;
}

}  // namespace deepinfer::protocol::testing

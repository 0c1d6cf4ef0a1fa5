// OpenAI Responses round trips: input items -> conversation -> prompt ids -> simulated model ids
// -> parser -> response object and typed stream events; plus validation errors.
#include <gtest/gtest.h>

#include "protocol/responses.h"
#include "protocol_test_util.h"

namespace deepinfer::protocol {
namespace {

using testing::kEos;

const char* kRequest = R"({
  "model": "deepseek-v4-flash", "instructions": "Be brief.",
  "input": [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "reasoning", "id": "rs_1", "summary": [],
     "content": [{"type": "reasoning_text", "text": "Need the tool."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
     "arguments": "{\"city\": \"Paris\"}"},
    {"type": "function_call_output", "call_id": "call_a", "output": "{\"temp\": 21}"}
  ],
  "tools": [{"type": "function", "name": "get_weather", "description": "Weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
             "strict": false}],
  "reasoning": {"effort": "high"}, "stream": true, "max_output_tokens": 50
})";

ResponseMeta meta() { return ResponseMeta{"resp_xyz", 1700000000, "deepseek-v4-flash"}; }

ChatRequest parse_ok(const std::string& body) {
  auto r = parse_responses(Json::parse(body), ProtocolOptions{});
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : ChatRequest{};
}

TEST(ResponsesTest, InputItemsBecomeTheConversation) {
  ChatRequest r = parse_ok(kRequest);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[0].tools, std::vector<std::string>{
      R"({"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false})"});
  EXPECT_EQ(r.messages[2].role, chat::Role::kAssistant);
  EXPECT_EQ(r.messages[2].reasoning_content, "Need the tool.");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].id, "call_a");
  EXPECT_EQ(r.messages[3].role, chat::Role::kTool);
  EXPECT_EQ(r.sampling.max_tokens, 50);
  EXPECT_EQ(r.render.thinking_mode, chat::ThinkingMode::kThinking);

  auto tok = testing::make_tokenizer();
  std::string text = tok->decode(prompt_ids(r, *tok).value());
  const std::string tail =
      "<｜User｜>Weather in Paris?<｜Assistant｜><think>Need the tool.</think>\n\n<｜DSML｜tool_calls>"
      "\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">"
      "Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + kEos +
      "<｜User｜><tool_result>{\"temp\": 21}</tool_result><｜Assistant｜><think>";
  ASSERT_GT(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
  EXPECT_NE(text.find("\"strict\": false}"), std::string::npos);
}

TEST(ResponsesTest, StreamedToolCallEvents) {
  ChatRequest r = parse_ok(kRequest);
  testing::Run run = testing::run_model(r, meta(), testing::tool_call_output("Hot.</think>"), 30);
  ResponsesStreamer streamer(r, meta());
  std::vector<Json> events = testing::stream_all(streamer, run);
  std::vector<std::string> types;
  for (size_t i = 0; i < events.size(); ++i) {
    types.push_back(events[i]["type"]);
    EXPECT_EQ(events[i]["sequence_number"], i);
  }
  std::vector<std::string> expected_types = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(types, expected_types);
  // Every response object ends with the request's settings, as OpenAI's do.
  const std::string echo =
      R"("instructions":"Be brief.","max_output_tokens":50,"metadata":{},"parallel_tool_calls":true,)"
      R"("previous_response_id":null,"reasoning":{"effort":"high","summary":null},"store":false,)"
      R"("temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[{"name":)"
      R"("get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":)"
      R"({"type":"string"}}},"strict":false,"type":"function"}],"top_p":1.0,"truncation":"disabled")";
  EXPECT_EQ(events[0].dump(),
            R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_xyz",)"
            R"("object":"response","created_at":1700000000,"status":"in_progress","error":null,)"
            R"("incomplete_details":null,"model":"deepseek-v4-flash","output":[],"usage":null,)" + echo + "}}");
  EXPECT_EQ(events[10].dump(),
            R"({"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_xyz",)"
            R"("output_index":1,"content_index":0,"delta":"Check.","logprobs":[]})");
  EXPECT_EQ(events[14].dump(),
            R"({"type":"response.output_item.added","sequence_number":14,"output_index":2,)"
            R"("item":{"id":"fc_xyz_0","type":"function_call","status":"in_progress",)"
            R"("call_id":"call_xyz_0","name":"get_weather","arguments":""}})");
  EXPECT_EQ(events[20].dump(),
            R"({"type":"response.function_call_arguments.done","sequence_number":20,)"
            R"("item_id":"fc_xyz_0","output_index":2,"arguments":"{\"city\": \"Lyon\"}"})");

  auto response = responses_response(run.output, r, meta(), run.usage.back());
  ASSERT_TRUE(response.is_ok());
  const std::string expected =
      R"({"id":"resp_xyz","object":"response","created_at":1700000000,"status":"completed",)"
      R"("error":null,"incomplete_details":null,"model":"deepseek-v4-flash","output":[)"
      R"({"id":"rs_xyz","type":"reasoning","summary":[],"content":[{"type":"reasoning_text",)"
      R"("text":"Hot."}]},{"id":"msg_xyz","type":"message","status":"completed","role":)"
      R"("assistant","content":[{"type":"output_text","text":"Check.","annotations":[]}]},)"
      R"({"id":"fc_xyz_0","type":"function_call","status":"completed","call_id":"call_xyz_0",)"
      R"("name":"get_weather","arguments":"{\"city\": \"Lyon\"}"}],"usage":{"input_tokens":30,)"
      R"("input_tokens_details":{"cached_tokens":0},"output_tokens":17,"output_tokens_details":)"
      R"({"reasoning_tokens":2},"total_tokens":47},)" + echo + "}";
  EXPECT_EQ(response->dump(), expected);
  // The streamed final response carries the same output and usage.
  EXPECT_EQ(events.back()["response"].dump(), expected);
}

TEST(ResponsesTest, LengthLimitIsIncomplete) {
  ChatRequest r = parse_ok(R"({"input": "hi", "thinking": {"type": "disabled"}})");
  auto tok = testing::make_tokenizer();
  auto parser = chat::OutputParser::create(tok, parser_options(r, meta()));
  std::vector<chat::ChatEvent> events;
  for (int32_t id : tok->ids("Sunny.")) parser->push(id, &events);
  parser->finish(chat::FinishReason::kLength, &events);
  ResponsesStreamer streamer(r, meta());
  std::vector<Json> out = streamer.on_events(events, usage_of(parser->output(), 5));
  EXPECT_EQ(out.back()["type"], "response.incomplete");
  EXPECT_EQ(out.back()["response"]["incomplete_details"].dump(), R"({"reason":"max_output_tokens"})");
  auto response = responses_response(parser->output(), r, meta(), usage_of(parser->output(), 5));
  EXPECT_EQ((*response)["status"], "incomplete");
  EXPECT_EQ((*response)["output"][0]["content"][0]["text"], "Sunny.");
}

TEST(ResponsesTest, ReasoningSummaryAndAssistantMessageMerge) {
  ChatRequest r = parse_ok(R"({"input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "a"},
                                        {"type": "summary_text", "text": "b"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ans"}]},
      {"role": "user", "content": "next"}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].reasoning_content, "a\n\nb");
  ASSERT_TRUE(r.messages[1].parts.has_value());
  EXPECT_EQ((*r.messages[1].parts)[0].text, "ans");
}

TEST(ResponsesTest, ValidationErrorsNameTheJsonPath) {
  auto error = [](const std::string& body) {
    auto r = parse_responses(Json::parse(body), ProtocolOptions{});
    EXPECT_FALSE(r.is_ok()) << body;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(error(R"({"model": "m"})"), "input: required");
  EXPECT_EQ(error(R"({"input": [{"type": "item_reference", "id": "x"}]})"),
            "input[0].type: unsupported input item type \"item_reference\"");
  EXPECT_EQ(error(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"),
            "input[0].call_id: required");
  EXPECT_EQ(error(R"({"input": [{"role": "user", "content": [{"type": "input_file"}]}]})"),
            "input[0].content[0].type: unsupported content type \"input_file\"");
  EXPECT_EQ(error(R"({"input": "x", "previous_response_id": "resp_1"})"),
            "previous_response_id: not supported: send the whole conversation in input");
  EXPECT_EQ(error(R"({"input": "x", "tools": [{"type": "file_search"}]})"),
            "tools[0].type: only \"function\" tools are supported");
  EXPECT_EQ(error(R"({"input": "x", "text": {"format": {"type": "xml"}}})"),
            "text.format.type: expected \"text\", \"json_object\" or \"json_schema\"");
  EXPECT_EQ(error(R"({"input": "x", "reasoning": {"effort": "huge"}})"),
            "reasoning.effort: unknown effort \"huge\" (expected none, minimal, low, medium, high, "
            "xhigh or max)");
}

}  // namespace
}  // namespace deepinfer::protocol

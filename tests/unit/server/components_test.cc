// Pieces of the server on their own: the content stop filter, histograms in Prometheus format,
// UTF-8 repair, error objects per API, admission tickets.
#include <gtest/gtest.h>

#include "admission.h"
#include "api_error.h"
#include "json_text.h"
#include "metrics.h"
#include "routes/stop_filter.h"

namespace deepinfer::server {
namespace {

chat::ChatEvent content(std::string text) {
  chat::ChatEvent e;
  e.kind = chat::EventKind::kContentDelta;
  e.text = std::move(text);
  return e;
}

std::string texts(const std::vector<chat::ChatEvent>& events) {
  std::string out;
  for (const auto& e : events) out += (e.kind == chat::EventKind::kContentDelta ? "" : "|") + e.text;
  return out;
}

TEST(StopFilterTest, HoldsBackOnlyWhatCouldStartAStop) {
  ContentStopFilter f({"STOP", "xy"});  // holds back 3 bytes
  std::vector<chat::ChatEvent> out;
  std::vector<chat::ChatEvent> in = {content("abcST")};
  EXPECT_FALSE(f.filter(in, &out));
  EXPECT_EQ(texts(out), "ab");
  out.clear();
  in = {content("OP and more")};
  EXPECT_TRUE(f.filter(in, &out));
  EXPECT_EQ(texts(out), "c");
  EXPECT_EQ(f.matched(), "STOP");
  EXPECT_EQ(f.content(), "abc");
  out.clear();
  EXPECT_TRUE(f.filter(in, &out));  // everything after a match is ignored
  EXPECT_TRUE(out.empty());
}

TEST(StopFilterTest, MatchesAcrossDeltasAndFlushesAtOtherEvents) {
  ContentStopFilter f({"world"});
  std::vector<chat::ChatEvent> out;
  chat::ChatEvent finish;
  finish.kind = chat::EventKind::kFinish;
  std::vector<chat::ChatEvent> in = {content("hello wo"), content("r")};
  EXPECT_FALSE(f.filter(in, &out));
  EXPECT_EQ(f.content(), "hello");  // " wor" (4 bytes) could still begin "world"
  in = {content("ld!")};
  EXPECT_TRUE(f.filter(in, &out));
  EXPECT_EQ(f.content(), "hello ");
  EXPECT_EQ(texts(out), "hello ");

  ContentStopFilter g({"zz"});
  out.clear();
  in = {content("abz"), finish};
  EXPECT_FALSE(g.filter(in, &out));
  EXPECT_EQ(texts(out), "abz|");  // the held "z" is flushed before the finish event
}

TEST(StopFilterTest, NeverSplitsUtf8AndPassesThroughWithoutStops) {
  ContentStopFilter f({"abc"});
  std::vector<chat::ChatEvent> out;
  std::vector<chat::ChatEvent> in = {content("x\xC3\xA9")};  // "xé": holding 2 bytes would split é
  EXPECT_FALSE(f.filter(in, &out));
  EXPECT_EQ(f.content(), "x");
  ContentStopFilter none({});
  out.clear();
  in = {content("abc")};
  EXPECT_FALSE(none.filter(in, &out));
  EXPECT_EQ(texts(out), "abc");
}

TEST(HistogramTest, PrometheusLines) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);
  h.observe(5);
  std::string out;
  h.render("x_seconds", "help text", &out);
  EXPECT_EQ(out,
            "# HELP x_seconds help text\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 2\nx_seconds_bucket{le=\"1\"} 2\nx_seconds_bucket{le=\"+Inf\"} 3\n"
            "x_seconds_sum 5.15\nx_seconds_count 3\n");
}

TEST(JsonTextTest, InvalidUtf8IsReplaced) {
  EXPECT_EQ(valid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(valid_utf8("a\xC3"), "a\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong NUL
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(json_text(protocol::Json("x\xFF")), "\"x\xEF\xBF\xBD\"");
  EXPECT_FALSE(parse_json_body("{\"a\": \"\xFF\"}").is_ok());
  EXPECT_EQ(parse_json_body("{\"a\":").status().message().rfind("invalid JSON body: parse error at line 1, column 6", 0), 0u);
}

TEST(ApiErrorTest, FormatsPerApi) {
  ApiError e = error_from_status(Status(StatusCode::kInvalidArgument, "messages[0].role: unsupported role \"x\""));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(json_text(error_json(e, ApiFormat::kOpenAI)),
            R"({"error":{"message":"messages[0].role: unsupported role \"x\"","type":"invalid_request_error","param":"messages[0].role","code":null}})");
  EXPECT_EQ(json_text(error_json(e, ApiFormat::kAnthropic)),
            R"({"type":"error","error":{"type":"invalid_request_error","message":"messages[0].role: unsupported role \"x\""}})");
  EXPECT_EQ(error_from_status(Status(StatusCode::kResourceExhausted, "full")).status, 429);
  EXPECT_EQ(error_from_status(Status(StatusCode::kInternal, "bug")).status, 500);
  EXPECT_EQ(error_from_status(Status(StatusCode::kInvalidArgument, "top_p = 1.5 is outside (0, 1]")).param, "");
  EXPECT_EQ(api_format_for_path("/v1/messages"), ApiFormat::kAnthropic);
  EXPECT_EQ(api_format_for_path("/v1/chat/completions"), ApiFormat::kOpenAI);
}

TEST(AdmissionTest, BoundTicketsAndClose) {
  Admission a(2);
  Ticket t1 = a.try_admit(), t2 = a.try_admit(), t3 = a.try_admit();
  EXPECT_TRUE(t1.valid());
  EXPECT_TRUE(t2.valid());
  EXPECT_FALSE(t3.valid());
  EXPECT_EQ(a.in_flight(), 2);
  t1.release();
  EXPECT_EQ(a.in_flight(), 1);
  Ticket moved = std::move(t2);
  EXPECT_EQ(a.in_flight(), 1);
  a.close();
  EXPECT_FALSE(a.try_admit().valid());
  EXPECT_FALSE(a.wait_idle(std::chrono::steady_clock::now()));
  moved.release();
  EXPECT_TRUE(a.wait_idle(std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace deepinfer::server

// Image parts of a chat request on their way to the engine: render_ids reports each placeholder's
// reference in the placeholders' order (across messages and tool results, as they render), and
// image_inputs decodes data URLs (base64, padded or not, wrapped lines) and refuses the rest by
// the image's index.
#include <gtest/gtest.h>

#include <algorithm>

#include "../chat/fake_tokenizer.h"
#include "protocol/chat_request.h"
#include "protocol/openai_chat.h"

namespace deepinfer::protocol {
namespace {

TEST(ImageRefsTest, DataUrlsDecode) {
  auto ok = image_inputs({"data:image/png;base64,aGVsbG8=", "data:image/jpeg;base64,aGVs\nbG8h", "data:;base64,YQ"});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].data, "hello");
  EXPECT_EQ((*ok)[1].data, "hello!");
  EXPECT_EQ((*ok)[2].data, "a");
  EXPECT_TRUE(image_inputs({})->empty());
}

TEST(ImageRefsTest, OtherReferencesAreRefusedByIndex) {
  auto error = [](std::vector<std::string> refs) {
    auto r = image_inputs(refs);
    return r.is_ok() ? std::string("accepted") : r.status().to_string();
  };
  const std::string good = "data:image/png;base64,aGVsbG8=";
  EXPECT_NE(error({"https://example.com/cat.png"}).find("image 0: only data URLs"), std::string::npos);
  EXPECT_NE(error({good, "data:image/png,aGVsbG8="}).find("image 1: the data URL is not base64"), std::string::npos);
  EXPECT_NE(error({good, good, "data:image/png;base64,aGV*bG8="}).find("image 2: invalid base64"), std::string::npos);
  EXPECT_NE(error({"data:image/png;base64,aGVsbG8=a"}).find("image 0: invalid base64"), std::string::npos);
  EXPECT_NE(error({"data:image/png;base64,a"}).find("truncated base64"), std::string::npos);
  EXPECT_NE(error({"data:image/png;base64,"}).find("holds no bytes"), std::string::npos);
}

TEST(ImageRefsTest, RenderReportsEachPlaceholdersImageInOrder) {
  const char* body = R"({"model": "m", "messages": [
    {"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ=="}},
      {"type": "text", "text": "and"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,Qg=="}}]},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,Qw=="}}]}]})";
  ProtocolOptions options;
  options.family = chat::ModelFamily::kV41;
  auto request = parse_chat_completions(Json::parse(body), options);
  ASSERT_TRUE(request.is_ok()) << request.status().to_string();
  chat::testing::FakeTokenizer tok;
  std::vector<std::string> refs;
  auto ids = prompt_ids(*request, tok, &refs);
  ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
  const int32_t image_id = tok.token_to_id("<｜deepseek_image｜>").value_or(-1);
  ASSERT_GE(image_id, 0);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), image_id), 3);
  auto images = image_inputs(refs);
  ASSERT_TRUE(images.is_ok()) << images.status().to_string();
  ASSERT_EQ(images->size(), 3u);
  EXPECT_EQ((*images)[0].data, "A");
  EXPECT_EQ((*images)[1].data, "B");
  EXPECT_EQ((*images)[2].data, "C");
}

}  // namespace
}  // namespace deepinfer::protocol

// Tokenizer::load / load_default failures: every message names the file (and the entry) at fault,
// and nothing crashes on malformed input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "deepinfer/tokenizer.h"
#include "synthetic_tokenizer.h"

namespace deepinfer {
namespace {

using ::testing::HasSubstr;
using testing_tokenizer::make_tokenizer_json;
using testing_tokenizer::SyntheticSpec;
using testing_tokenizer::write_temp_file;

Status load_status(const std::string& contents) {
  const std::string path = write_temp_file("tokenizer.json", contents);
  auto tok = Tokenizer::load(path);
  EXPECT_FALSE(tok.is_ok());
  // Every message must name the file.
  EXPECT_THAT(tok.status().message(), HasSubstr(path));
  return tok.status();
}

nlohmann::json valid_json() {
  SyntheticSpec spec;
  spec.merges = {{"a", "b"}};
  return make_tokenizer_json(spec);
}

TEST(TokenizerLoadTest, ValidSyntheticFileLoads) {
  auto tok = Tokenizer::load(write_temp_file("tokenizer.json", valid_json().dump()));
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->n_vocab(), 257);
  EXPECT_EQ((*tok)->bos_id(), -1);  // no BOS text in this vocabulary
}

TEST(TokenizerLoadTest, MissingFileNamesThePath) {
  auto tok = Tokenizer::load("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(tok.is_ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr("/nonexistent/dir/tokenizer.json"));
}

TEST(TokenizerLoadTest, DirectoryIsRejected) {
  auto tok = Tokenizer::load(::testing::TempDir());
  ASSERT_FALSE(tok.is_ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("directory"));
}

TEST(TokenizerLoadTest, MalformedJson) {
  EXPECT_THAT(load_status("{\"model\": {\"vocab\": ").message(),
              HasSubstr("invalid tokenizer JSON"));
  EXPECT_THAT(load_status("").message(), HasSubstr("invalid tokenizer JSON"));
  EXPECT_THAT(load_status("[1, 2]").message(), HasSubstr("not a JSON object"));
}

TEST(TokenizerLoadTest, MissingModelOrMerges) {
  nlohmann::json j = valid_json();
  j.erase("model");
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model: missing"));
  j = valid_json();
  j["model"].erase("merges");
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.merges"));
  j = valid_json();
  j["model"].erase("vocab");
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.vocab"));
  j = valid_json();
  j["model"]["vocab"] = nlohmann::json::object();
  j["model"]["merges"] = nlohmann::json::array();
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.vocab is empty"));
}

TEST(TokenizerLoadTest, BadEntriesAreNamed) {
  nlohmann::json j = valid_json();
  j["model"]["merges"] = {"a b", "x"};  // second entry lacks the space
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.merges[1]"));
  j = valid_json();
  j["model"]["merges"] = {"a zz"};  // "zz" is not a token
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.merges[0]"));
  j = valid_json();
  j["model"]["vocab"]["bad"] = "seven";
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("model.vocab[\"bad\"]"));
  j = valid_json();
  j["model"]["vocab"].erase("a");  // byte 'a' has no token any more
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("byte 0x61"));
  j = valid_json();
  j["added_tokens"] = {{{"id", 5}}};
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("added_tokens[0]"));
  j = valid_json();
  j["added_tokens"] = {{{"id", 1}, {"content", "<x>"}}};  // id 1 is the vocab byte 0x01
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("id 1"));
}

TEST(TokenizerLoadTest, UnsupportedComponentsAreUnimplemented) {
  nlohmann::json j = valid_json();
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}};
  Status s = load_status(j.dump());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("Metaspace"));
  j = valid_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("Removed"));
  j = valid_json();
  j["model"]["type"] = "WordPiece";
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("WordPiece"));
  j = valid_json();
  j["decoder"] = {{"type", "Metaspace"}};
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("decoder"));
  j = valid_json();
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("normalizer"));
}

TEST(TokenizerLoadTest, BadRegexIsReported) {
  nlohmann::json j = valid_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_THAT(load_status(j.dump()).message(), HasSubstr("cannot compile pattern"));
}

TEST(TokenizerLoadTest, LoadDefaultHonoursEnvironment) {
  ::setenv("DEEPINFER_TOKENIZER", "/nonexistent/env/tokenizer.json", 1);
  auto tok = Tokenizer::load_default();
  ::unsetenv("DEEPINFER_TOKENIZER");
  ASSERT_FALSE(tok.is_ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("$DEEPINFER_TOKENIZER"));
  EXPECT_THAT(tok.status().message(), HasSubstr("/nonexistent/env/tokenizer.json"));
}

}  // namespace
}  // namespace deepinfer

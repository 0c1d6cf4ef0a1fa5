// safetensors reader/writer: round trip and every header/offset/shape consistency error, each of
// which must name the file and (where there is one) the tensor, never crash.
#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/file.h"
#include "loader/checkpoint.h"

namespace deepinfer::loader {
namespace {

using tensor::DType;

std::string tmp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "di_safetensors_test";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

Status parse(const std::string& bytes) {
  auto r = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), bytes.size(),
                                    "test.safetensors");
  return r.status();
}

TEST(SafetensorsTest, WriterOutputReadsBack) {
  SafetensorsWriter w;
  w.add("b", DType::kF32, {2}, std::string("\0\0\x80\x3f\0\0\0\x40", 8));
  w.add("a", DType::kI8, {3}, "xyz");
  const std::string path = tmp_path("rt.safetensors");
  ASSERT_TRUE(w.write(path).is_ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* a = f->find("a");
  const TensorInfo* b = f->find("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->begin, 0u);  // tensors are laid out in name order
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data(*a)), 3), "xyz");
  float v[2];
  std::memcpy(v, f->data(*b), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  auto bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u);  // header padded to 8 bytes
}

TEST(SafetensorsTest, WriterRejectsWrongByteCount) {
  SafetensorsWriter w;
  w.add("x", DType::kF32, {3}, "abcd");
  const Status s = w.write(tmp_path("bad.safetensors"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos);
}

TEST(SafetensorsTest, HeaderErrorsNameFileAndTensor) {
  struct Case {
    std::string header, data, expect;
  };
  const std::vector<Case> cases = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234", "truncated"},
      {R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "1234", "unknown dtype 'F33'"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678", "needs 12"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "12345678", "overlap"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       "12345678", "appears twice"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234", "non-negative"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", "12345678", "begin > end"},
      {R"({"w":{"dtype":"F32","shape":[1]}})", "1234", "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904, 4],"data_offsets":[0,4]}})", "1234", "overflow"},
      {R"({"__metadata__":{"format":3}})", "", "not a string"},
      {R"([1,2,3])", "", "not a JSON object"},
      {R"({"w":)", "", "not valid JSON"},
  };
  for (const Case& c : cases) {
    const Status s = parse(raw_file(c.header, c.data));
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << c.header;
    EXPECT_NE(s.message().find("test.safetensors"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.header << " -> " << s.message();
  }
}

TEST(SafetensorsTest, HeaderLengthBeyondFileIsAnError) {
  std::string bytes(8, '\0');
  const uint64_t n = 1000;
  std::memcpy(bytes.data(), &n, 8);
  bytes += "{}";
  EXPECT_NE(parse(bytes).message().find("exceeds the file size"), std::string::npos);
  EXPECT_EQ(parse("abc").code(), StatusCode::kDataLoss);
}

TEST(SafetensorsTest, TruncatedFileOnDiskIsReportedNotCrashed) {
  SafetensorsWriter w;
  w.add("big", DType::kF32, {1024}, std::string(4096, 'x'));
  const std::string path = tmp_path("trunc.safetensors");
  ASSERT_TRUE(w.write(path).is_ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  auto f = SafetensorsFile::open(path);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("'big'"), std::string::npos);
  EXPECT_NE(f.status().message().find(path), std::string::npos);
}

TEST(CheckpointTest, IndexAndShardsMustAgree) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "di_ckpt_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  SafetensorsWriter w;
  w.add("a", DType::kI8, {1}, "x");
  w.add("b", DType::kI8, {1}, "y");
  ASSERT_TRUE(w.write((dir / "s1.safetensors").string()).is_ok());
  auto write_index = [&](const std::string& map) {
    ASSERT_TRUE(write_file_atomic((dir / "model.safetensors.index.json").string(),
                                  R"({"metadata":{"total_size":2},"weight_map":)" + map + "}")
                    .is_ok());
  };
  write_index(R"({"a":"s1.safetensors","b":"s1.safetensors"})");
  auto ok = Checkpoint::open(dir.string());
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_TRUE(ok->find("b").has_value());
  EXPECT_EQ(ok->tensor_names(), (std::vector<std::string>{"a", "b"}));

  write_index(R"({"a":"s1.safetensors"})");
  auto extra = Checkpoint::open(dir.string());
  ASSERT_FALSE(extra.is_ok());
  EXPECT_NE(extra.status().message().find("'b'"), std::string::npos) << extra.status().message();

  write_index(R"({"a":"s1.safetensors","b":"s1.safetensors","c":"s1.safetensors"})");
  auto missing = Checkpoint::open(dir.string());
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'c'"), std::string::npos);

  write_index(R"({"a":"../etc/passwd"})");
  EXPECT_FALSE(Checkpoint::open(dir.string()).is_ok());
  write_index(R"({"a":"s2.safetensors"})");
  auto absent = Checkpoint::open(dir.string());
  ASSERT_FALSE(absent.is_ok());
  EXPECT_NE(absent.status().message().find("s2.safetensors"), std::string::npos);
  EXPECT_EQ(Checkpoint::open((dir / "nope").string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepinfer::loader

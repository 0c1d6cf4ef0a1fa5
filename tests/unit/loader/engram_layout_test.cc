// Engram hashing constants (model_v41_flash.md §4.1, §13): numpy's default_rng multipliers
// reproduced bit for bit, the prime search with one global "seen" set, the per-layer offsets, and
// the token-map sidecar (round trip and the errors that protect the multipliers).
#include "loader/engram_layout.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "loader/safetensors.h"
#include "loader/synthetic.h"

namespace deepinfer::loader {
namespace {

using V = std::vector<int64_t>;

TEST(EngramLayoutTest, TinyPrimesOffsetsAndMultipliersMatchTheSpec) {
  auto e = make_engram_layout(tiny_v41_config());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->n_cols(), 6);
  EXPECT_EQ(e->primes[0], (V{101, 103, 107, 109, 113, 127}));
  EXPECT_EQ(e->primes[1], (V{131, 137, 139, 149, 151, 157}));
  EXPECT_EQ(e->offsets[0], (V{0, 101, 204, 311, 420, 533}));
  EXPECT_EQ(e->offsets[1], (V{0, 131, 268, 407, 556, 707}));
  EXPECT_EQ(e->multipliers[0], (V{29662608052400909, 1873410163432121, 13919202536988139, 28638879857136817}));
  EXPECT_EQ(e->multipliers[1], (V{31841131192811251, 1950019090429101, 28509641033320619, 7337012813361983}));
}

TEST(EngramLayoutTest, ReleasedConfigPrimesAndMultipliers) {
  ModelConfig c = tiny_v41_config();
  c.vocab_size = 129280;
  c.engram_layer_ids = {1, 14};
  c.engram_vocab_size = 16000000;
  c.engram_n_heads = 8;
  c.engram_compressed_vocab_size = 99092;
  c.engram_num_embeddings = {384006168, 384016682};
  auto e = make_engram_layout(c);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->primes[0].front(), 16000057);
  EXPECT_EQ(e->primes[0][1], 16000079);
  EXPECT_EQ(e->primes[0][2], 16000081);
  EXPECT_EQ(e->primes[0].back(), 16000463);
  EXPECT_EQ(e->primes[1].front(), 16000477);
  EXPECT_EQ(e->primes[1].back(), 16000889);
  EXPECT_EQ(e->multipliers[0], (V{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  EXPECT_EQ(e->multipliers[1], (V{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
}

TEST(EngramLayoutTest, NumpyIntegersAndPrimality) {
  // (2^63 - 1) // 99092 // 2 and layer 1's raw draws: the multipliers above are raw * 2 + 1.
  EXPECT_EQ(numpy_default_rng_integers(10007, 46539438283891, 2), (V{38316048023122, 2419938046656}));
  EXPECT_TRUE(is_prime(16000057));
  EXPECT_FALSE(is_prime(16000059));
  EXPECT_FALSE(is_prime(1));
  EXPECT_TRUE(is_prime(2));
}

TEST(EngramLayoutTest, TokenMapIsHalvedForTheTinyVocabulary) {
  const std::vector<int32_t> m = synthetic_engram_token_map(tiny_v41_config());
  ASSERT_EQ(m.size(), 512u);
  for (int32_t i = 0; i < 512; ++i) ASSERT_EQ(m[i], i / 2) << i;
}

class SidecarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("di_engram_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SidecarTest, RoundTripsAndRejectsAMismatchedVocabulary) {
  const ModelConfig c = tiny_v41_config();
  ASSERT_TRUE(write_engram_sidecar(c, synthetic_engram_token_map(c), dir_).is_ok());
  auto m = load_engram_sidecar(c, dir_);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->pad_id, 1);  // token_map[2]
  EXPECT_EQ(m->token_map[511], 255);
  // A tokenizer map yielding 128 compressed ids cannot serve a config that says 256.
  std::vector<int32_t> quarter(512);
  for (int32_t i = 0; i < 512; ++i) quarter[i] = i / 4;
  ASSERT_TRUE(write_engram_sidecar(c, quarter, dir_).is_ok());
  auto bad = load_engram_sidecar(c, dir_);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("compressed vocabulary of 128"), std::string::npos) << bad.status().message();
  // Constants derived for another config are caught.
  ModelConfig other = c;
  other.engram_layer_ids = {1, 3};
  ASSERT_TRUE(write_engram_sidecar(other, synthetic_engram_token_map(c), dir_).is_ok());
  auto stale = load_engram_sidecar(c, dir_);
  ASSERT_FALSE(stale.is_ok());
  EXPECT_NE(stale.status().message().find("'multipliers' differs"), std::string::npos) << stale.status().message();
  std::filesystem::remove(std::filesystem::path(dir_) / kEngramSidecarFile);
  EXPECT_EQ(load_engram_sidecar(c, dir_).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace deepinfer::loader

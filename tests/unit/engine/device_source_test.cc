// DeviceTensorSource (engine/device_backend.h) on the CPU backend: every tensor of tiny-v41 copied
// into the backend's memory but the ones the host_resident predicate names — V4.1's Engram tables,
// which the model reads row by row on the host — which stay the host views, and the copy still
// binds as a V4.1 checkpoint whose Engram tables point at the mapping.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/device_backend.h"
#include "loader/checkpoint.h"
#include "loader/weights_v41.h"
#include "ops/cpu/cpu_ops.h"
#include "test_models.h"

namespace deepinfer::engine {
namespace {

TEST(DeviceTensorSourceTest, HostResidentTensorsStayHostViewsAndTheRestAreCopies) {
  const std::string dir = testing::synthetic_model_dir("tiny-v41");
  auto config = loader::load_model_config(dir);
  ASSERT_TRUE(config.is_ok()) << config.status().to_string();
  auto ckpt = loader::Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.is_ok()) << ckpt.status().to_string();
  loader::CheckpointSource host(*ckpt);
  ops::cpu::CpuOps ops;
  DeviceTensorSource copied(host, &ops, loader::is_engram_table);
  int tables = 0;
  for (const std::string& name : host.names()) {
    const tensor::TensorView h = *host.get(name), d = *copied.get(name);
    ASSERT_EQ(h.nbytes(), d.nbytes()) << name;
    if (loader::is_engram_table(name)) {
      ++tables;
      EXPECT_EQ(d.data, h.data) << name << " was copied";
    } else {
      EXPECT_NE(d.data, h.data) << name << " was not copied";
      EXPECT_EQ(std::memcmp(d.data, h.data, h.nbytes()), 0) << name;
    }
  }
  EXPECT_GT(tables, 0) << "tiny-v41 has Engram layers: their tables must be named";
  auto weights = loader::bind_weights_v41(*config, copied);
  ASSERT_TRUE(weights.is_ok()) << weights.status().to_string();
  bool bound = false;
  for (const auto& layer : weights->layers) {
    if (!layer.engram) continue;
    bound = true;
    const std::string name = "layers." + std::to_string(layer.layer) + ".engram.embed.weight";
    EXPECT_EQ(layer.engram->table.weight.data, host.get(name)->data) << name;
  }
  EXPECT_TRUE(bound);
}

}  // namespace
}  // namespace deepinfer::engine

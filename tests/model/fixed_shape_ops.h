// A CPU backend that reports step-graph support and treats the prepare pass as the real one, so
// every graph-shaped step of a model on it runs in fixed shapes (step_graph.h) — for the tests
// that hold fixed-shape steps to the exact-shape results bit for bit.
#pragma once

#include "ops/cpu/cpu_ops.h"

namespace deepinfer::testing {

class FixedShapeCpuOps final : public ops::cpu::CpuOps {
 public:
  bool graphs_enabled() const override { return true; }
  GraphStep graph_replay() override {
    ++prepared;
    return GraphStep::kReplayed;  // the prepare pass ran the ops for real
  }
  int prepared = 0;
};

}  // namespace deepinfer::testing

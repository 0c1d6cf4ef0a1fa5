// Kernel timeline of a decode step as the GPU runs it (`deepinfer bench --timeline`): the start and
// end of every kernel, including the nodes of a replayed CUDA graph, from CUPTI's activity records.
// ncu serialises kernels and times each alone, so it cannot show what the replayed step spends
// between dependent launches (the PDL overlap, launch gaps, side-stream joins); this does.
// libcupti is loaded at run time (dlopen), so the binary does not depend on it; where it is missing
// (or on a build without CUDA) open() says so and the benchmark goes on without the timeline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace deepinfer::engine {

struct KernelSpan {
  std::string name;  // demangled
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t stream = 0;
  int64_t ctas = 0;  // grid size
};

// The GPU's idle intervals of a step: between the end of everything that ran before and the next
// kernel's start.
struct TimelineGap {
  double us = 0;
  std::string before, after;  // the kernel that ended last before the gap, and the one after it
  double at_us = 0;           // the gap's start, from the first kernel's start
};

struct TimelineSummary {
  int64_t kernels = 0;
  double span_us = 0;        // first start to last end
  double busy_us = 0;        // the union of the kernels' intervals
  double idle_us = 0;        // span - busy: no kernel running
  double kernel_sum_us = 0;  // the kernels' durations added (> busy where kernels overlap)
  std::vector<TimelineGap> largest_gaps;  // the top_n idle intervals, largest first
};

// Summary of spans (any order) keeping the top_n largest gaps. Plain C++: tested on the CPU.
TimelineSummary summarize_timeline(std::vector<KernelSpan> spans, int top_n);

// Records the kernels the device runs between begin() and end(). One at a time per process (CUPTI's
// activity buffers are process-wide).
class KernelTimeline {
 public:
  // Loads libcupti and registers the activity buffers; an error names what is missing.
  static Result<std::unique_ptr<KernelTimeline>> open();
  virtual ~KernelTimeline() = default;
  virtual Status begin() = 0;
  // Waits for the device, flushes the records and returns the kernels in start order.
  virtual Result<std::vector<KernelSpan>> end() = 0;
};

}  // namespace deepinfer::engine

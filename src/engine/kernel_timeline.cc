// KernelTimeline (kernel_timeline.h): CUPTI's concurrent-kernel activity records through a libcupti
// loaded at run time, and the summary of a step's spans.
#include "engine/kernel_timeline.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#ifdef DI_HAVE_CUDA
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <cxxabi.h>
#include <dlfcn.h>
#endif

namespace deepinfer::engine {

TimelineSummary summarize_timeline(std::vector<KernelSpan> spans, int top_n) {
  TimelineSummary s;
  s.kernels = static_cast<int64_t>(spans.size());
  if (spans.empty()) return s;
  std::sort(spans.begin(), spans.end(), [](const KernelSpan& a, const KernelSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });
  const uint64_t t0 = spans.front().start_ns;
  uint64_t covered_to = spans.front().start_ns, busy = 0, total = 0;
  const KernelSpan* last_end = &spans.front();  // the kernel that ends at covered_to
  std::vector<TimelineGap> gaps;
  for (const KernelSpan& k : spans) {
    const uint64_t end = std::max(k.end_ns, k.start_ns);
    total += end - k.start_ns;
    if (k.start_ns > covered_to) {  // nothing runs in [covered_to, start)
      gaps.push_back({(k.start_ns - covered_to) / 1e3, last_end->name, k.name, (covered_to - t0) / 1e3});
      busy += end - k.start_ns;
      covered_to = end;
      last_end = &k;
    } else if (end > covered_to) {  // overlaps what ran before and extends it
      busy += end - covered_to;
      covered_to = end;
      last_end = &k;
    }
  }
  s.span_us = (covered_to - t0) / 1e3;
  s.busy_us = busy / 1e3;
  s.idle_us = s.span_us - s.busy_us;
  s.kernel_sum_us = total / 1e3;
  std::stable_sort(gaps.begin(), gaps.end(), [](const TimelineGap& a, const TimelineGap& b) { return a.us > b.us; });
  if (static_cast<int>(gaps.size()) > top_n) gaps.resize(static_cast<size_t>(std::max(0, top_n)));
  s.largest_gaps = std::move(gaps);
  return s;
}

#ifdef DI_HAVE_CUDA
namespace {

// The libcupti entry points used (types from the toolkit's headers, addresses from dlsym).
struct Cupti {
  void* lib = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
};

// Records land here from CUPTI's buffer-completed callback (its own thread, or the flush's).
std::mutex g_mu;
std::vector<KernelSpan>* g_sink = nullptr;
Cupti* g_cupti = nullptr;
bool g_open = false;  // a timeline exists (CUPTI's callbacks are process-wide)

constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : name;
  std::free(d);
  return out;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity* rec = nullptr;
  while (g_cupti != nullptr && g_cupti->next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    if (g_sink != nullptr) {
      g_sink->push_back({demangle(k->name), k->start, k->end, k->streamId,
                         static_cast<int64_t>(k->gridX) * k->gridY * k->gridZ});
    }
  }
  std::free(buffer);
}

class CuptiTimeline final : public KernelTimeline {
 public:
  explicit CuptiTimeline(Cupti c) : cupti_(c) {}
  ~CuptiTimeline() override {
    if (active_) (void)end();
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_cupti == &cupti_) g_cupti = nullptr;
    g_open = false;
  }
  Status begin() override {
    if (active_) return failed_precondition("kernel timeline: begin() twice");
    cudaDeviceSynchronize();  // earlier work is not part of the record
    {
      std::lock_guard<std::mutex> lock(g_mu);
      spans_.clear();
      g_sink = &spans_;
      g_cupti = &cupti_;
    }
    if (const CUptiResult r = cupti_.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
      return internal_error("kernel timeline: cuptiActivityEnable failed ({})", static_cast<int>(r));
    }
    active_ = true;
    return Status::ok();
  }
  Result<std::vector<KernelSpan>> end() override {
    if (!active_) return failed_precondition("kernel timeline: end() without begin()");
    cudaDeviceSynchronize();
    cupti_.flush_all(1);  // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: the partly filled buffers too
    cupti_.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    active_ = false;
    std::lock_guard<std::mutex> lock(g_mu);
    g_sink = nullptr;
    std::vector<KernelSpan> out = std::move(spans_);
    std::sort(out.begin(), out.end(), [](const KernelSpan& a, const KernelSpan& b) { return a.start_ns < b.start_ns; });
    return out;
  }

 private:
  Cupti cupti_;
  std::vector<KernelSpan> spans_;
  bool active_ = false;
};

template <typename F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

}  // namespace

Result<std::unique_ptr<KernelTimeline>> KernelTimeline::open() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_open) return failed_precondition("kernel timeline: one is open already");
  }
  Cupti c;
  for (const char* path : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                           "/usr/local/cuda/lib64/libcupti.so"}) {
    if ((c.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  }
  if (c.lib == nullptr) return not_found("kernel timeline: libcupti not found (LD_LIBRARY_PATH, /usr/local/cuda)");
  if (!bind(c.lib, "cuptiActivityRegisterCallbacks", c.register_callbacks) ||
      !bind(c.lib, "cuptiActivityEnable", c.enable) || !bind(c.lib, "cuptiActivityDisable", c.disable) ||
      !bind(c.lib, "cuptiActivityFlushAll", c.flush_all) ||
      !bind(c.lib, "cuptiActivityGetNextRecord", c.next_record)) {
    return not_found("kernel timeline: libcupti lacks the activity API");
  }
  if (const CUptiResult r = c.register_callbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    return internal_error("kernel timeline: cuptiActivityRegisterCallbacks failed ({})", static_cast<int>(r));
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_open = true;
  return std::unique_ptr<KernelTimeline>(new CuptiTimeline(c));
}
#else
Result<std::unique_ptr<KernelTimeline>> KernelTimeline::open() {
  return unimplemented("kernel timeline: this build has no CUDA backend");
}
#endif

}  // namespace deepinfer::engine

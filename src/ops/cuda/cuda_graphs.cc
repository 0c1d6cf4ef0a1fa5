// CudaOps step graphs: the prepare pass (host work only, signature of the step's launches), graph
// replay keyed by that signature (when to record and what to keep: GraphCache), and the pinned
// staging memory the recorded uploads read from.
//
// Why a signature instead of a shape key: a recorded graph bakes in every kernel argument. The
// signature covers what those arguments are made of — each workspace address and size handed out
// (tensor shapes, hence every size a launcher derives), each upload's size and staging offset, the
// sequence of launch sites (control flow), and the caller's key for the persistent buffers it
// uses (the model and its KV state) — so two passes with one signature make the same launches.
// What varies between such steps (token ids, positions, tables, emission plans) travels through
// uploads, which the graph re-reads from staging on every replay.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void CudaOps::mix(uint64_t v) {
  // splitmix64 of (state ^ v): order-sensitive and well spread.
  uint64_t z = sig_ ^ (v + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  sig_ = z ^ (z >> 31);
}

bool CudaOps::launch_site(const char* file, int line) {
  if (mode_ == Mode::kEager) {
    join_host_copies();  // eager work may overwrite what a pending copy back reads
    return true;
  }
  mix(reinterpret_cast<uintptr_t>(file));
  mix(static_cast<uint64_t>(line));
  return mode_ == Mode::kCapture;
}

const void* CudaOps::stage(const void* host, size_t bytes) {
  const size_t offset = (staging_used_ + 15) / 16 * 16;
  staging_used_ = offset + bytes;
  mix(offset);
  mix(bytes);
  if (staging_used_ > staging_size_) {
    staging_wanted_ = std::max(staging_wanted_, staging_used_ * 2);  // room from the next prepare on
    replayable_ = false;
    return nullptr;
  }
  std::memcpy(staging_ + offset, host, bytes);
  return staging_ + offset;
}

void CudaOps::start_pass(Mode mode) {
  mode_ = mode;
  sig_ = 0;
  mix(state_key_);
  staging_used_ = 0;
  replayable_ = true;
}

void CudaOps::keep_graph(uint64_t sig, cudaGraphExec_t exec) {
  if (void* evicted = graph_cache_->store(sig, exec)) {
    DI_CUDA_CHECK(cudaStreamSynchronize(main_stream_));  // it may still be running
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(evicted));
  }
}

void CudaOps::drop_graphs() {
  if (graph_cache_ == nullptr || graph_cache_->size() == 0) return;
  cudaStreamSynchronize(main_stream_);  // none may be running when destroyed
  for (void* g : graph_cache_->clear()) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g));
}

void CudaOps::count_nodes(cudaGraph_t graph) {
  // A failed query is cleared from the runtime's last error, which the next launch check reads.
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  std::vector<cudaGraphNode_t> nodes(n);
  if (cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  GraphStats& g = graph_stats_;
  g.last_kernels = g.last_copies = g.last_memsets = g.last_other = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeCount;  // counted as "other" if the query fails
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) cudaGetLastError();
    ++(type == cudaGraphNodeTypeKernel ? g.last_kernels
       : type == cudaGraphNodeTypeMemcpy ? g.last_copies
       : type == cudaGraphNodeTypeMemset ? g.last_memsets
                                          : g.last_other);
  }
  log_info("CUDA graph recorded: {} kernels, {} copies, {} memsets, {} other nodes", g.last_kernels, g.last_copies,
            g.last_memsets, g.last_other);
  // DEEPINFER_CUDA_GRAPH_DOT=path: the recording as Graphviz (node types, kernel names and edges,
  // programmatic ones included) — where a replayed step waits that a kernel timeline cannot show.
  if (const char* dot = std::getenv("DEEPINFER_CUDA_GRAPH_DOT"); dot != nullptr && *dot != '\0') {
    if (cudaGraphDebugDotPrint(graph, dot, cudaGraphDebugDotFlagsVerbose) != cudaSuccess) {
      cudaGetLastError();
      log_warn("DEEPINFER_CUDA_GRAPH_DOT: could not write the step graph to {}", dot);
    }
  }
}

void CudaOps::graph_prepare(uint64_t state_key) {
  DI_CHECK(mode_ == Mode::kEager, "graph_prepare inside another graph pass");
  if (n_staging_slots_ == 1) {
    // Copy nodes inside the recorded graphs read this one slot: wait for the last replay.
    DI_CUDA_CHECK(cudaEventSynchronize(graph_done_));
  } else {
    // The next slot of the ring: free once the copy queued out of it (kStagingSlots steps ago)
    // ran — the step just launched may still be running, which is the point.
    staging_slot_ = (staging_slot_ + 1) % n_staging_slots_;
    DI_CUDA_CHECK(cudaEventSynchronize(slot_copied_[staging_slot_]));
  }
  if (staging_size_ < staging_wanted_) {
    DI_CUDA_CHECK(cudaStreamSynchronize(main_stream_));  // no queued copy still reads a slot
    drop_graphs();  // they read the old staging buffer (and its device copy)
    for (int i = 0; i < n_staging_slots_; ++i) {
      if (staging_slots_[i] != nullptr) DI_CUDA_CHECK(cudaFreeHost(staging_slots_[i]));
      DI_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&staging_slots_[i]), staging_wanted_, cudaHostAllocDefault));
    }
    if (one_upload_) {
      if (staging_dev_ != nullptr) DI_CUDA_CHECK(cudaFree(staging_dev_));
      DI_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&staging_dev_), staging_wanted_));
    }
    staging_size_ = staging_wanted_;
  }
  staging_ = staging_slots_[staging_slot_];
  state_key_ = state_key;
  start_pass(Mode::kPrepare);
  prepare_start_ = std::chrono::steady_clock::now();
}

Ops::GraphStep CudaOps::graph_replay() {
  DI_CHECK(mode_ == Mode::kPrepare, "graph_replay without graph_prepare");
  mode_ = Mode::kEager;
  prepared_sig_ = sig_;
  prepared_staged_ = staging_used_;
  void* graph = nullptr;
  switch (replayable_ ? graph_cache_->decide(sig_, &graph) : GraphCache::Decision::kEager) {
    case GraphCache::Decision::kReplay: {
      const auto t0 = std::chrono::steady_clock::now();
      upload_staging();
      DI_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), main_stream_));
      DI_CUDA_CHECK(cudaEventRecord(graph_done_, main_stream_));
      join_host_copies();  // the graph may read a pending copy's source (take_tokens), not write it
      const auto t1 = std::chrono::steady_clock::now();
      ++graph_stats_.replayed;
      ++host_time_.replayed;
      host_time_.prepare_us += std::chrono::duration<double, std::micro>(t0 - prepare_start_).count();
      host_time_.launch_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      return GraphStep::kReplayed;
    }
    case GraphCache::Decision::kRecord:
      return GraphStep::kCapture;
    case GraphCache::Decision::kEager:
      break;
  }
  ++graph_stats_.eager;
  return GraphStep::kEager;
}

void CudaOps::graph_capture_begin() {
  DI_CHECK(mode_ == Mode::kEager, "graph_capture_begin inside another graph pass");
  join_host_copies();  // before the capture: a recording must not wait on work outside it
  start_pass(Mode::kCapture);
  // Relaxed: launchers may set kernel attributes (not stream work) while recording.
  DI_CUDA_CHECK(cudaStreamBeginCapture(main_stream_, cudaStreamCaptureModeRelaxed));
}

void CudaOps::upload_staging() {
  // The step's uploads, staged by the prepare pass (a capture pass stages the same bytes at the
  // same offsets: the signatures match or the recording is discarded), in one copy queued before
  // the graph — not a node inside it, so each replay reads its own ring slot. The copy must not
  // overwrite staging_dev_ while the previous graph reads it: on the main stream, stream order
  // sees to that; on the copy stream (cuda_copy_streams.cc), a wait for graph_done_.
  if (staging_dev_ != nullptr && copy_streams_on_) return upload_staging_beside();
  if (staging_dev_ != nullptr && prepared_staged_ > 0 && prepared_staged_ <= staging_size_) {
    DI_CUDA_CHECK(cudaMemcpyAsync(staging_dev_, staging_, prepared_staged_, cudaMemcpyHostToDevice, main_stream_));
  }
  DI_CUDA_CHECK(cudaEventRecord(slot_copied_[staging_slot_], main_stream_));
}

bool CudaOps::graph_capture_end() {
  DI_CHECK(mode_ == Mode::kCapture, "graph_capture_end without graph_capture_begin");
  mode_ = Mode::kEager;
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(main_stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  bool ok = err == cudaSuccess && graph != nullptr && replayable_ && sig_ == prepared_sig_;
  if (ok) {
    count_nodes(graph);
    ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!ok) {
    cudaGetLastError();  // clear a capture error: the caller reruns the step eagerly
    ++graph_stats_.failed;
    keep_graph(prepared_sig_, nullptr);  // not tried again
    log_warn("CUDA graph recording failed ({}); steps of this shape run eagerly",
             err != cudaSuccess ? cudaGetErrorString(err)
                                : (sig_ != prepared_sig_ ? "the recorded pass differs from the prepared one"
                                                         : "not replayable"));
    return false;
  }
  keep_graph(prepared_sig_, exec);
  upload_staging();
  DI_CUDA_CHECK(cudaGraphLaunch(exec, main_stream_));
  DI_CUDA_CHECK(cudaEventRecord(graph_done_, main_stream_));
  ++graph_stats_.captured;
  return true;
}

}  // namespace deepinfer::ops::cuda

// Backend selection: the ops for a device name, and checkpoint tensors copied to that device.
// Only this file and its .cc know that a CUDA backend exists (compiled when DI_HAVE_CUDA).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "loader/weight_binding.h"
#include "ops/ops.h"

namespace deepinfer::engine {

// "cpu", or "cuda" / "cuda:N" when the CUDA backend is built and a GPU is present.
Result<std::unique_ptr<ops::Ops>> make_ops(const std::string& device);

// The backend "auto" means: "cuda" when this build has the CUDA backend, a GPU is visible and the
// model can run there (`device_capable`: V4 and V4.1 both can), else "cpu". Other names pass
// through.
std::string resolve_device(const std::string& device, bool device_capable);

// Device copies of every tensor of a host source (one persistent allocation each); the FP4 code
// tensors (the checkpoint's only I8 tensors) in the ops' device layout.
class DeviceTensorSource final : public loader::TensorSource {
 public:
  // host_resident(name): that tensor is not copied — get() returns the host view (V4.1's Engram
  // tables, which the model reads row by row on the host, §4: never required on the GPU).
  DeviceTensorSource(const loader::TensorSource& host, ops::Ops* ops,
                     const std::function<bool(const std::string&)>& host_resident = {});
  std::optional<tensor::TensorView> get(const std::string& name) const override;
  std::vector<std::string> names() const override;
  std::string where(const std::string& name) const override { return host_.where(name); }
  bool fp4_device_layout() const override { return fp4_device_layout_; }
  int64_t bytes() const { return bytes_; }

 private:
  const loader::TensorSource& host_;
  std::map<std::string, tensor::TensorView> views_;
  int64_t bytes_ = 0;
  bool fp4_device_layout_ = true;  // every FP4 code tensor (I8) rewritten by the ops
};

}  // namespace deepinfer::engine

#include "engine/device_backend.h"

#include "ops/cpu/cpu_ops.h"
#ifdef DI_HAVE_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace deepinfer::engine {

Result<std::unique_ptr<ops::Ops>> make_ops(const std::string& device) {
  if (device == "cpu") return std::unique_ptr<ops::Ops>(new ops::cpu::CpuOps());
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
#ifdef DI_HAVE_CUDA
    if (!ops::cuda::cuda_available()) return failed_precondition("device '{}': no CUDA GPU is visible", device);
    ops::cuda::CudaOpsOptions options;
    if (device.size() > 5) options.device = std::stoi(device.substr(5));
    return std::unique_ptr<ops::Ops>(new ops::cuda::CudaOps(options));
#else
    return unimplemented("device '{}': this build has no CUDA backend (nvcc was not found at configure time)", device);
#endif
  }
  return invalid_argument("device '{}' must be cpu, cuda or cuda:N", device);
}

std::string resolve_device(const std::string& device, bool device_capable) {
  if (device != "auto") return device;
#ifdef DI_HAVE_CUDA
  if (device_capable && ops::cuda::cuda_available()) return "cuda";
#else
  (void)device_capable;
#endif
  return "cpu";
}

DeviceTensorSource::DeviceTensorSource(const loader::TensorSource& host, ops::Ops* ops,
                                       const std::function<bool(const std::string&)>& host_resident)
    : host_(host) {
  for (const std::string& name : host.names()) {
    const tensor::TensorView h = *host.get(name);
    if (host_resident && host_resident(name)) {
      views_[name] = h;
      continue;
    }
    tensor::TensorView d;
    switch (h.rank) {
      case 1: d = ops->alloc_persistent(h.dtype, {h.shape[0]}); break;
      case 2: d = ops->alloc_persistent(h.dtype, {h.shape[0], h.shape[1]}); break;
      case 3: d = ops->alloc_persistent(h.dtype, {h.shape[0], h.shape[1], h.shape[2]}); break;
      default: d = ops->alloc_persistent(h.dtype, {h.numel()}); d = d.reshape({h.numel()});
    }
    ops->copy(h, d);
    if (h.dtype == tensor::DType::kI8) fp4_device_layout_ = ops->to_fp4_device_layout(d) && fp4_device_layout_;
    bytes_ += static_cast<int64_t>(h.nbytes());
    views_[name] = d;
  }
}

std::optional<tensor::TensorView> DeviceTensorSource::get(const std::string& name) const {
  auto it = views_.find(name);
  if (it == views_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> DeviceTensorSource::names() const { return host_.names(); }

}  // namespace deepinfer::engine

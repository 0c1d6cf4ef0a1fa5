// deepinfer._core: the compiled half of the `deepinfer` Python package (the vLLM-shaped classes
// are pure Python in deepinfer/). Exposes Engine/Stream, sampling validation and the model
// resolution helpers; Status errors become ValueError (invalid arguments) or RuntimeError.
#include <pybind11/stl.h>

#include "convert.h"
#include "deepinfer/model.h"

namespace deepinfer::python {
void bind_engine(py::module_& m);
}  // namespace deepinfer::python

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  using namespace deepinfer::python;  // NOLINT(google-build-using-namespace)
  m.doc() = "DeepInfer engine bindings (use the deepinfer package, not this module directly)";
  bind_engine(m);
  m.def("validate_sampling", [](const py::dict& d) { sampling_from_dict(d); },
        "Raises ValueError naming the field if the sampling dict is invalid");
  m.def("resolve_model_dir", [](const std::string& model) { return unwrap(deepinfer::resolve_model_dir(model)); },
        py::arg("model"));
  m.def("cache_dir", &deepinfer::cache_dir);
  m.attr("DEFAULT_MODEL_ID") = deepinfer::kDefaultModelId;
  m.attr("DEMO_MODEL") = deepinfer::kDemoModelName;
}

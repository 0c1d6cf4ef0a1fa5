// Conversions between Python objects and the public API types for the deepinfer._core module:
// Status → Python exception (ValueError for invalid arguments, RuntimeError otherwise), the
// sampling dict (vLLM field names) → SamplingParams, engine-option kwargs → EngineOptions, and
// outputs → plain dicts that the pure-Python layer wraps in vLLM-shaped classes.
#pragma once

#include <pybind11/pybind11.h>

#include "deepinfer/engine.h"

namespace deepinfer::python {

namespace py = pybind11;

// Throws the Python exception for a non-OK status (ValueError: invalid argument / out of range).
void throw_status(const Status& status);
template <typename T>
T unwrap(Result<T> result) {
  if (!result.is_ok()) throw_status(result.status());
  return std::move(result).value();
}

// {"n": 1, "temperature": 0.0, "max_tokens": 16, "stop": [...], ...}; unknown keys → ValueError.
SamplingParams sampling_from_dict(const py::dict& d);
// {"json": ..., "regex": ..., "grammar": ..., "json_object": True}: exactly one.
std::optional<StructuredOutput> structured_from_dict(const py::object& o);
// Engine options from keyword arguments (EngineOptions field names); unknown keys → ValueError.
// DeepInfer's environment variables are applied first, so explicit arguments win.
EngineOptions engine_options_from_kwargs(const py::dict& kwargs);
// A Request from {"prompt": str | None, "prompt_token_ids": list | None, "sampling": dict,
// "structured_outputs": dict | None, "cache_salt": str}.
Request request_from_dict(const py::dict& d);

py::dict output_to_dict(const GenerateOutput& out);
py::dict event_to_dict(const TokenEvent& e);
py::dict stats_to_dict(const EngineStats& s);

}  // namespace deepinfer::python

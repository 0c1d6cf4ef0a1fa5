// The baseline half of `deepinfer bench` (include/deepinfer/bench.h): another engine's rows (e.g.
// HF transformers, tools/bench/hf_baseline.py) embedded in the result, and each DeepInfer row that
// has a baseline row of the same kind, batch and context given the ratio of the two throughputs —
// the "x times transformers" the CUDA targets are stated in, read off the JSON instead of by hand.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "deepinfer/status.h"

namespace deepinfer::engine {

// Parses `baseline_text` (a JSON object with a "rows" array; rows without tokens_per_s — skipped
// shapes — are kept but match nothing), stores it as result["baseline"] and sets
// "baseline_tokens_per_s" and "vs_baseline" on every matching row of result["rows"]. A baseline
// that is not such an object is an error naming what is wrong; `result` is then unchanged.
Status attach_baseline(nlohmann::json& result, std::string_view baseline_text);

}  // namespace deepinfer::engine

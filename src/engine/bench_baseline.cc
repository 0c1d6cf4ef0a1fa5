// attach_baseline (bench_baseline.h).
#include "engine/bench_baseline.h"

#include "base/status.h"

namespace deepinfer::engine {

using json = nlohmann::json;

namespace {
// The row's positive throughput, or 0 (absent, skipped or not a number).
double throughput(const json& row) {
  const auto it = row.find("tokens_per_s");
  return it != row.end() && it->is_number() && it->get<double>() > 0.0 ? it->get<double>() : 0.0;
}
bool same_shape(const json& a, const json& b) {
  for (const char* key : {"kind", "batch", "context"}) {
    const auto ia = a.find(key), ib = b.find(key);
    if (ia == a.end() || ib == b.end() || *ia != *ib) return false;
  }
  return true;
}
}  // namespace

Status attach_baseline(json& result, std::string_view baseline_text) {
  json base = json::parse(baseline_text, nullptr, /*allow_exceptions=*/false);
  if (base.is_discarded()) return invalid_argument("baseline: not valid JSON");
  if (!base.is_object()) return invalid_argument("baseline: expected a JSON object with \"rows\"");
  const auto rows = base.find("rows");
  if (rows == base.end() || !rows->is_array()) return invalid_argument("baseline: \"rows\" must be an array");
  for (size_t i = 0; i < rows->size(); ++i)
    if (!(*rows)[i].is_object()) return invalid_argument("baseline: rows[{}] is not an object", i);
  if (result.contains("rows") && result["rows"].is_array()) {
    for (json& row : result["rows"]) {
      const double ours = throughput(row);
      for (const json& theirs : *rows) {
        const double t = throughput(theirs);
        if (ours <= 0.0 || t <= 0.0 || !same_shape(row, theirs)) continue;
        row["baseline_tokens_per_s"] = t;
        row["vs_baseline"] = ours / t;
        break;
      }
    }
  }
  result["baseline"] = std::move(base);
  return Status::ok();
}

}  // namespace deepinfer::engine

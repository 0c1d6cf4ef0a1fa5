// Fp8MmaModel's step from E4M3 codes and its text form (fp8_order_ref.h). Apart from
// fp8_order_ref.cc so the device probe (tools/device/probes/wgmma_fp8_accum_probe.cu) compiles
// it alone, without the engine's libraries.
#include <charconv>
#include <string_view>

#include "ops/cpu/fp8_order_ref.h"
#include "tensor/number_formats.h"

namespace deepinfer::ops::cpu {

float fp8_mma_step_codes(const uint8_t* a, const uint8_t* b, float acc, const Fp8MmaModel& m) {
  double prod[32];
  int nominal[32];
  for (int p = 0; p < 32; ++p) {
    prod[p] = static_cast<double>(tensor::e4m3_to_f32(a[p])) * static_cast<double>(tensor::e4m3_to_f32(b[p]));
    nominal[p] = fp8_mma_detail::e4m3_nominal_exponent(a[p]) + fp8_mma_detail::e4m3_nominal_exponent(b[p]);
  }
  return fp8_mma_step(prod, acc, m, nominal);
}

bool parse_fp8_mma_model(const char* text, Fp8MmaModel& m) {
  using R = Fp8MmaModel::Rounding;
  using T = Fp8MmaModel::Truncation;
  Fp8MmaModel r;
  std::string_view rest(text);
  for (bool more = !rest.empty(); more;) {  // an empty item (",," or a trailing comma) is refused below
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    more = comma != std::string_view::npos;
    rest = more ? rest.substr(comma + 1) : std::string_view();
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    int n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    const bool number = ec == std::errc() && end == value.data() + value.size();
    if (key == "g" && number && (n == 4 || n == 8 || n == 16 || n == 32)) r.group = n;
    else if (key == "n" && number && n > 0 && n <= 60) r.bits = n;
    else if (key == "ch" && number && (n == 1 || n == 2 || n == 4)) r.chunk = n;
    else if (key == "extra" && number && n >= 0 && n <= 8) r.extra = n;
    else if (key == "nominal" && number && n <= 1) r.nominal_exponent = n == 1;
    else if (key == "acc" && number && n <= 1) r.acc_aligned = n == 1;
    else if (key == "lay" && number && n <= 1) r.fragment_order = n == 1;
    else if (key == "trunc" && (value == "zero" || value == "floor")) r.truncation = value == "zero" ? T::kTowardZero : T::kFloor;
    else if (key == "rnd" && (value == "rz" || value == "rn" || value == "rzbits"))
      r.rounding = value == "rz" ? R::kTowardZero : (value == "rn" ? R::kNearestEven : R::kTowardZeroToBits);
    else return false;
  }
  if (r.group % r.chunk != 0) return false;
  m = r;
  return true;
}

std::string fp8_mma_model_text(const Fp8MmaModel& m) {
  using R = Fp8MmaModel::Rounding;
  const char* rnd = m.rounding == R::kTowardZero ? "rz" : (m.rounding == R::kNearestEven ? "rn" : "rzbits");
  return "g=" + std::to_string(m.group) + ",n=" + std::to_string(m.bits) + ",nominal=" +
         std::to_string(m.nominal_exponent ? 1 : 0) + ",trunc=" +
         (m.truncation == Fp8MmaModel::Truncation::kFloor ? "floor" : "zero") + ",acc=" +
         std::to_string(m.acc_aligned ? 1 : 0) + ",rnd=" + rnd + ",extra=" + std::to_string(m.extra) +
         ",ch=" + std::to_string(m.chunk) + ",lay=" + std::to_string(m.fragment_order ? 1 : 0);
}

}  // namespace deepinfer::ops::cpu

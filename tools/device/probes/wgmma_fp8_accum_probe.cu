// Probe (device only, not part of the build): how Hopper's FP8 tensor core rounds a k32 step, to
// the bit — what a CPU reference of the FP8 order (fp8_gemv.cuh's header) must emulate before the
// GPU suite can hold DEEPINFER_GEMM_FP8_ORDER=1's model outputs to the official-numerics bound
// (README "Next, in order" 0). Session 45's probe (wgmma_fp8_probe.cu) found one k32 step from
// zero off the exact sum by up to 6.6e-5 of sum |products|; public reports put the accumulator at
// ~13 mantissa bits with truncation. This probe measures, with the decode kernel's form
// (wgmma.m64n8k32.e4m3, A from registers, B K-major in shared memory; position p of a step is
// k = 32 s + p in both operands):
//   T1  one step from zero (scale-d 0);
//   T2  one step onto a preloaded F32 accumulator (values 2^-8 .. 2^8 of the products' scale);
//   T3  a 128-input block: four chained steps, the first from zero (the FP8 order's `part`);
// on each of the input sets (kSetNames: dense at exponent spreads 0, 3, 6; sparse; near-cancelling
// pairs; the whole E4M3 range; wide accumulators), and scores a family of candidate models against
// every output bitwise. A candidate is an Fp8MmaModel of the CPU reference
// (src/ops/cpu/fp8_order_ref.h, included: the model this probe confirms is the one it runs),
// printed as its text (g group size, n bits kept below the alignment exponent, nominal: that
// exponent from the operands' exponent fields rather than the products', trunc zero / floor, acc:
// the accumulator inside the alignment, rnd / extra the group sum's rounding, lay the A fragment's
// position order, ch products per exact term; fp8_order_ref.h says each).
// Output: every candidate's matches per test, best first (stdout, and $OUT/accum_probe.json when
// OUT is set), every set's inputs and outputs ($OUT/fp8_accum_raw.bin) and the best candidate's
// text ($OUT/best_model.txt). A candidate at 100% on every test is the model the CPU reference
// takes. `--score FILE` scores a dump without a GPU (a wider family costs no device time).
// Build here: nvcc -std=c++20 -O2 -Xcompiler -fopenmp -gencode arch=compute_90a,code=sm_90a -I src \
//   -o .carry/probe/wgmma_fp8_accum_probe tools/device/probes/wgmma_fp8_accum_probe.cu src/ops/cpu/fp8_mma_model.cc -lgomp
// (on the device: LD_LIBRARY_PATH=.carry/lib, pack.sh's libgomp). Check the scoring without a GPU:
// the same with -DPROBE_HOST_CHECK, which takes the outputs from the model PROBE_KNOWN names
// instead of the tensor core — that one (and only its equivalents) must score every output.
// Exit status 0: a candidate matched every output (its text in $OUT/best_model.txt); 3: none did.
#include <cuda_runtime.h>

#ifndef PROBE_KNOWN
#define PROBE_KNOWN "g=16,n=13,nominal=1,trunc=floor,acc=1,rnd=rz"  // the host check's stand-in for the tensor core
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/wgmma_utils.cuh"  // descriptor and wgmma sync primitives
#include "kernels/gemm/fp8_gemv.cuh"        // the decode kernel's step: wgmma_m64n8k32_e4m3_rs
#include "ops/cpu/fp8_order_ref.h"            // the step models (the CPU reference's)

using namespace deepinfer::kernels;
using deepinfer::ops::cpu::Fp8MmaModel;
using deepinfer::ops::cpu::fp8_mma_model_text;
using deepinfer::ops::cpu::fp8_mma_step_codes;
using deepinfer::ops::cpu::parse_fp8_mma_model;

namespace {

constexpr int M = 64, N = 8, kSteps = 4, K = 32 * kSteps, kCtas = 4;  // 2,048 outputs per test

__host__ __device__ inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
  return x;
}
// A finite E4M3 code, biased exponent 7 +- spread (1..13: no subnormals, no NaN), random sign.
__host__ __device__ inline uint8_t draw_e4m3(uint32_t seed, uint32_t i, int spread) {
  const uint32_t h = hash32(seed * 0x9e3779b9u + i * 0x85ebca6bu + 1234u);
  const int e = 7 + static_cast<int>((h >> 8) % (2 * spread + 1)) - spread;
  return static_cast<uint8_t>(((h >> 31) << 7) | (e << 3) | (h & 7));
}
double e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (b & 0x80) ? -v : v;
}
// The preloaded accumulator of T2 at output i: +-(1 + f) x 2^e, e in -8 .. 8, 23 random fraction bits.
float draw_acc(uint32_t seed, uint32_t i) {
  const uint32_t h = hash32(seed * 0x27d4eb2fu + i * 0x165667b1u + 99u), f = hash32(h) & 0x7fffffu;
  const int e = static_cast<int>(h % 17) - 8;
  const float v = std::ldexp(1.0f + static_cast<float>(f) * 0x1p-23f, e);
  return (h >> 31) ? -v : v;
}

// A: [cta][M][K], B: [cta][N][K] E4M3; acc: [cta][M][N] (T2's preload). out: [3][cta][M][N] (T1, T2, T3).
__global__ void __launch_bounds__(128) probe(const uint8_t* A, const uint8_t* B, const float* acc, float* out) {
  __shared__ __align__(128) uint8_t sB[N * K];  // per step: core matrices (8 rows x 16 bytes), K-major
  const int cta = blockIdx.x;
  A += cta * M * K;
  B += cta * N * K;
  acc += cta * M * N;
  for (int i = threadIdx.x; i < N * K; i += 128) {
    const int n = i / K, k = i % K, s = k / 32, kk = k % 32;
    sB[s * N * 32 + (n / 8) * 256 + (kk / 16) * 128 + (n % 8) * 16 + kk % 16] = B[i];
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  auto at = [&](int e) { return (16 * warp + g + (e >= 2 ? 8 : 0)) * N + 2 * c + (e & 1); };  // accumulator e's (m, n)
  auto step = [&](float (&d)[4], int s, bool accumulate) {
    auto word = [&](int r, int k) { return *reinterpret_cast<const uint32_t*>(A + r * K + k); };
    const int r = 16 * warp + g, k = 32 * s + 4 * c;
    const uint32_t a[4] = {word(r, k), word(r + 8, k), word(r, k + 16), word(r + 8, k + 16)};
    wgmma_fence();
    wgmma_m64n8k32_e4m3_rs(d, a, wgmma_desc(sB + s * N * 32, 128, 256), accumulate);
    wgmma_commit();
    wgmma_wait<0>();
  };
  float t1[4] = {0, 0, 0, 0}, t2[4], t3[4] = {0, 0, 0, 0};
  for (int e = 0; e < 4; ++e) t2[e] = acc[at(e)];
  step(t1, 0, false);
  step(t2, 0, true);
  for (int s = 0; s < kSteps; ++s) step(t3, s, s > 0);
  const float* res[3] = {t1, t2, t3};
  for (int t = 0; t < 3; ++t)
    for (int e = 0; e < 4; ++e) out[(static_cast<size_t>(t) * gridDim.x + cta) * M * N + at(e)] = res[t][e];
}

// The input sets: three dense ones at exponent spreads 0, 3 and 6 (session 55's), then sets that
// isolate one effect each — sparse A (~1 product in 6 nonzero: alignment of a few terms), pairs
// that nearly cancel (the normalisation after cancellation), the whole E4M3 range with subnormals,
// and accumulators far above and below the products (T2 / T3's alignment of the accumulator).
constexpr int kSets = 7;
const char* const kSetNames[kSets] = {"s0", "s3", "s6", "sparse", "cancel", "subnormal", "acc-wide"};
uint8_t set_code(int set, int operand, uint32_t i) {
  const uint32_t seed = 2 * set + 1 + operand;
  switch (set) {
    case 0: return draw_e4m3(seed, i, 0);
    case 1: return draw_e4m3(seed, i, 3);
    case 2: case 6: return draw_e4m3(seed, i, 6);
    case 3: return operand == 0 && hash32(i * 31u + 7u) % 6 != 0 ? 0 : draw_e4m3(seed, i, 6);
    case 4: {  // A: position p + 16 of a step is -(position p) with its mantissa nudged; B: +1
      if (operand == 1) return 0x38;
      const uint32_t p = i % 32, base = i - p % 16;
      const uint8_t a = draw_e4m3(seed, base, 4);
      return p < 16 ? a : static_cast<uint8_t>((a ^ 0x80) ^ (hash32(i) % 3 == 0 ? 1 : 0));
    }
    default: {  // any finite code: exponent fields 0 (subnormal) .. 15, mantissa not 7 at 15 (NaN)
      const uint32_t h = hash32(seed * 0x9e3779b9u + i * 0x85ebca6bu + 77u);
      const uint8_t c = static_cast<uint8_t>(h & 0xff);
      return (c & 0x7f) == 0x7f ? static_cast<uint8_t>(c & 0xfe) : c;
    }
  }
}
float set_acc(int set, uint32_t i) {
  if (set != 6) return draw_acc(set + 7, i);
  const uint32_t h = hash32(i * 0x2545f491u + 5u);  // 2^-24 .. 2^24 of the products
  return std::ldexp(draw_acc(13, i), static_cast<int>(h % 33) - 16);
}

// Every set's inputs and the tensor core's outputs, for fitting models off the GPU
// ($OUT/fp8_accum_raw.bin: per set A [4][64][128], B [4][8][128] codes, acc [4][64][8] F32,
// out [3][4][64][8] F32 (T1, T2, T3)).
void dump_raw(int set, const std::vector<uint8_t>& A, const std::vector<uint8_t>& B, const std::vector<float>& acc,
              const std::vector<float>& out) {
  const char* dir = std::getenv("OUT");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/fp8_accum_raw.bin";
  if (FILE* f = std::fopen(path.c_str(), set == 0 ? "wb" : "ab")) {
    std::fwrite(A.data(), 1, A.size(), f);
    std::fwrite(B.data(), 1, B.size(), f);
    std::fwrite(acc.data(), sizeof(float), acc.size(), f);
    std::fwrite(out.data(), sizeof(float), out.size(), f);
    std::fclose(f);
  }
}

// The candidate models: the Fp8MmaModel family around public reports of a ~13-bit accumulator
// with truncation (groups, kept bits, the alignment's exponent and truncation, where the
// accumulator joins, the final rounding, the position order).
std::vector<Fp8MmaModel> candidates() {
  using R = Fp8MmaModel::Rounding;
  using T = Fp8MmaModel::Truncation;
  std::vector<Fp8MmaModel> out;
  for (int g : {8, 16, 32})
    for (int n = 11; n <= 16; ++n)
      for (bool nominal : {false, true})
        for (T tr : {T::kTowardZero, T::kFloor})
          for (bool acc : {false, true})
            for (int rnd = 0; rnd < 5; ++rnd)
              for (bool lay : {false, true}) {
                if (g == 32 && lay) continue;  // one group: the order does not matter
                Fp8MmaModel m;
                m.group = g, m.bits = n, m.nominal_exponent = nominal, m.truncation = tr, m.acc_aligned = acc;
                m.fragment_order = lay;
                m.rounding = rnd == 0 ? R::kTowardZero : (rnd == 1 ? R::kNearestEven : R::kTowardZeroToBits);
                m.extra = rnd >= 2 ? rnd - 1 : 1;
                out.push_back(m);
              }
  return out;
}

// A set's three answers at output o under a model: T1 one step from zero, T2 onto acc, T3 four
// chained steps.
void answers(const uint8_t* a, const uint8_t* b, float c, const Fp8MmaModel& m, float (&r)[3]) {
  r[0] = fp8_mma_step_codes(a, b, 0.0f, m);
  r[1] = fp8_mma_step_codes(a, b, c, m);
  r[2] = 0.0f;
  for (int s = 0; s < kSteps; ++s) r[2] = fp8_mma_step_codes(a + 32 * s, b + 32 * s, r[2], m);
}

}  // namespace

int main(int argc, char** argv) {
  // --score FILE: score the candidates against an earlier run's dump instead of the tensor core.
  FILE* replay = argc == 3 && std::string(argv[1]) == "--score" ? std::fopen(argv[2], "rb") : nullptr;
  if (argc > 1 && replay == nullptr) {
    std::fprintf(stderr, "usage: %s [--score fp8_accum_raw.bin]\n", argv[0]);
    return 2;
  }
  const std::vector<Fp8MmaModel> models = candidates();
  const int n_tests = 3 * kSets;  // (T1, T2, T3) x sets
  std::vector<long> hits(models.size() * n_tests, 0);
  const long outputs_per_test = static_cast<long>(kCtas) * M * N;
  std::vector<long> exact_hits(n_tests, 0);  // the exact sum rounded to nearest: the default order's kind of answer

  uint8_t *dA, *dB;
  float *dAcc, *dOut;
  cudaMalloc(&dA, kCtas * M * K);
  cudaMalloc(&dB, kCtas * N * K);
  cudaMalloc(&dAcc, kCtas * M * N * sizeof(float));
  cudaMalloc(&dOut, 3 * kCtas * M * N * sizeof(float));
  for (int si = 0; si < kSets; ++si) {
    std::vector<uint8_t> A(kCtas * M * K), B(kCtas * N * K);
    std::vector<float> acc(kCtas * M * N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = set_code(si, 0, static_cast<uint32_t>(i));
    for (size_t i = 0; i < B.size(); ++i) B[i] = set_code(si, 1, static_cast<uint32_t>(i));
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = set_acc(si, static_cast<uint32_t>(i));
    std::vector<float> out(3 * kCtas * M * N);
    const size_t per = static_cast<size_t>(kCtas) * M * N;  // outputs per test
    auto row_a = [&](size_t o) { return &A[(o / N) * K]; };                      // output o = (cta, m, n)
    auto row_b = [&](size_t o) { return &B[((o / (M * N)) * N + o % N) * K]; };
    if (replay != nullptr) {
      const bool ok = std::fread(A.data(), 1, A.size(), replay) == A.size() &&
                      std::fread(B.data(), 1, B.size(), replay) == B.size() &&
                      std::fread(acc.data(), sizeof(float), acc.size(), replay) == acc.size() &&
                      std::fread(out.data(), sizeof(float), out.size(), replay) == out.size();
      if (!ok) {
        std::fprintf(stderr, "%s: set %d is incomplete\n", argv[2], si);
        return 2;
      }
    } else {
#ifndef PROBE_HOST_CHECK
      cudaMemcpy(dA, A.data(), A.size(), cudaMemcpyHostToDevice);
      cudaMemcpy(dB, B.data(), B.size(), cudaMemcpyHostToDevice);
      cudaMemcpy(dAcc, acc.data(), acc.size() * sizeof(float), cudaMemcpyHostToDevice);
      probe<<<kCtas, 128>>>(dA, dB, dAcc, dOut);
      if (cudaDeviceSynchronize() != cudaSuccess) {
        std::printf("probe failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      cudaMemcpy(out.data(), dOut, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
#else
      Fp8MmaModel known;
      if (!parse_fp8_mma_model(PROBE_KNOWN, known)) return 2;
      for (size_t o = 0; o < per; ++o) {
        float r[3];
        answers(row_a(o), row_b(o), acc[o], known, r);
        for (int t = 0; t < 3; ++t) out[t * per + o] = r[t];
      }
#endif
      dump_raw(si, A, B, acc, out);
    }
    for (size_t o = 0; o < per; ++o) {
      double exact[3] = {0, acc[o], 0};
      for (int k = 0; k < K; ++k) {
        const double p = e4m3_value(row_a(o)[k]) * e4m3_value(row_b(o)[k]);
        if (k < 32) exact[0] += p, exact[1] += p;
        exact[2] += p;
      }
      for (int t = 0; t < 3; ++t) exact_hits[3 * si + t] += static_cast<float>(exact[t]) == out[t * per + o];
    }
#pragma omp parallel for schedule(dynamic)
    for (size_t mi = 0; mi < models.size(); ++mi) {
      long* h = &hits[mi * n_tests + 3 * si];
      for (size_t o = 0; o < per; ++o) {
        float r[3];
        answers(row_a(o), row_b(o), acc[o], models[mi], r);
        for (int t = 0; t < 3; ++t) h[t] += r[t] == out[t * per + o];
      }
    }
  }
  std::vector<size_t> order(models.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto total = [&](size_t mi) {
    long t = 0;
    for (int j = 0; j < n_tests; ++j) t += hits[mi * n_tests + j];
    return t;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return total(a) > total(b); });
  std::string json = "{\"outputs_per_test\": " + std::to_string(outputs_per_test) + ", \"tests\": [";
  std::printf("outputs per test: %ld; tests (T1, T2, T3) of sets", outputs_per_test);
  for (int si = 0; si < kSets; ++si) {
    std::printf(" %s", kSetNames[si]);
    for (int t = 0; t < 3; ++t) json += std::string(si + t ? ", " : "") + "\"T" + std::to_string(t + 1) + " " + kSetNames[si] + "\"";
  }
  json += "], \"exact_rn_hits\": [";
  std::printf("\nexact sum rounded to nearest:");
  for (int j = 0; j < n_tests; ++j) {
    std::printf(" %ld", exact_hits[j]);
    json += (j ? ", " : "") + std::to_string(exact_hits[j]);
  }
  std::printf("\n");
  json += "], \"models\": [";
  for (size_t r = 0; r < order.size(); ++r) {
    const std::string text = fp8_mma_model_text(models[order[r]]);
    std::string row = "{\"model\": \"" + text + "\", \"hits\": [";
    if (r < 16) std::printf("%s:", text.c_str());
    for (int j = 0; j < n_tests; ++j) {
      const long h = hits[order[r] * n_tests + j];
      if (r < 16) std::printf(" %ld", h);
      row += (j ? ", " : "") + std::to_string(h);
    }
    if (r < 16) std::printf("%s\n", total(order[r]) == outputs_per_test * n_tests ? "  <- every output" : "");
    json += (r ? ", " : "") + row + "]}";
  }
  json += "]}\n";
  if (const char* dir = std::getenv("OUT")) {
    const std::string path = std::string(dir) + "/accum_probe.json";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
    // The best candidate, for the next step's end-to-end check (DEEPINFER_FP8_MMA_MODEL).
    if (FILE* f = std::fopen((std::string(dir) + "/best_model.txt").c_str(), "w")) {
      std::fprintf(f, "%s\n", fp8_mma_model_text(models[order[0]]).c_str());
      std::fclose(f);
    }
  }
  return total(order[0]) == outputs_per_test * n_tests ? 0 : 3;
}

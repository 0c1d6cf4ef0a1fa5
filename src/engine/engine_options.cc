// EngineOptions: field validation, and the one place DeepInfer's environment variables are read
// (architecture.md §1.11: env knobs are read once into EngineOptions, never deep in the code).
// Model-dependent checks (block_tokens vs the compression ratios, max_model_len vs the position
// limit) live in engine_config.cc, which sees the model.
#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>

#include "base/log.h"
#include "base/status.h"
#include "deepinfer/engine.h"

extern char** environ;  // NOLINT: POSIX

namespace deepinfer {
namespace {

// Every DEEPINFER_* name something in DeepInfer reads; anything else is reported as unknown.
constexpr const char* kKnownVariables[] = {
    "DEEPINFER_HF_MODEL_DIR",          "DEEPINFER_ACCELERATOR",
    "DEEPINFER_ENABLE_MTP_VARLEN",     "DEEPINFER_USE_NEXTN_DECODE",
    "DEEPINFER_BATCH_INVARIANT",       "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE",
    "DEEPINFER_ASYNC_SCHEDULING",
    "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "DEEPINFER_LOG_LEVEL",
    "DEEPINFER_SPEC_VERIFICATION",
    "DEEPINFER_CACHE_DIR",             "DEEPINFER_TOKENIZER",
    // `deepinfer serve`'s --api-key (read by the CLI).
    "DEEPINFER_API_KEY",
    // The test harness's (tests/support: the source tree's fixtures, the synthetic checkpoints'
    // folder), set by the CUDA suite on the device.
    "DEEPINFER_SOURCE_DIR", "DEEPINFER_TEST_MODELS_DIR",
    // CUDA tuning knobs and A/B switches, read by the backend (numerically neutral): GEMV ring
    // depth, K sub-ranges per CTA (all launches / expert launches), tile forms, the activation
    // quantisation and RMS-norm folds, column tiles per CTA, the lean decode kernel, tokens per mHC mixing block, the fused
    // norm + RoPE kernel, MoE grouping, the MoE combine with the shared expert's add, the attention
    // output's RoPE fold, hc_post in the next mixing pass.
    "DEEPINFER_GEMV_STAGES",           "DEEPINFER_GEMV_MAX_SPC", "DEEPINFER_GEMV_EXPERT_SPC", "DEEPINFER_GEMV_EXPERT_CHUNK",
    "DEEPINFER_GEMM_SPLIT_FOLD", "DEEPINFER_GEMV_SPLIT_FOLD",
    "DEEPINFER_GEMV_TRANSPOSED", "DEEPINFER_GEMV_TR_MIN_NT", "DEEPINFER_MOE_GROUP_SMALL", "DEEPINFER_MOE_ROUTE_GROUP",
    "DEEPINFER_GEMV_FUSE_QUANT", "DEEPINFER_GEMV_TILES_PER_CTA", "DEEPINFER_GEMV_MULTI_WAVES",
    "DEEPINFER_GEMV_LEAN", "DEEPINFER_GEMV_LEAN_EXPERTS", "DEEPINFER_GEMV_LEAN_STAGES", "DEEPINFER_GEMV_LEAN_TILES", "DEEPINFER_GEMV_LEAN_WIDE", "DEEPINFER_GEMV_LEAN_WIDE_COMPACT",
    "DEEPINFER_GEMV_LEAN_DEEP_CTAS",
    "DEEPINFER_HC_FOLD_NORM", "DEEPINFER_HC_MIX_TOKENS", "DEEPINFER_HC_POST_FUSED",
    "DEEPINFER_NORM_ROPE_FUSED", "DEEPINFER_MOE_FUSED_COMBINE", "DEEPINFER_ATTN_FOLD_ROPE",
    // CUDA step graphs (default on; 0 = eager launches), read by the backend.
    "DEEPINFER_CUDA_GRAPHS", "DEEPINFER_CUDA_SIDE_STREAM", "DEEPINFER_CUDA_ONE_UPLOAD", "DEEPINFER_CUDA_COPY_STREAMS",
    "DEEPINFER_CUDA_GRAPH_DOT",
    // CUDA large-M GEMM kernel (`mma`: the mma.sync pipelined kernel instead of wgmma; same bits)
    // and the packed paths' thresholds (rows; output tiles; expert tokens).
    "DEEPINFER_GEMM_KERNEL", "DEEPINFER_GEMM_PACKED_ROWS", "DEEPINFER_GEMM_PACKED_MIN_TILES",
    "DEEPINFER_GEMM_PACKED_EXPERTS", "DEEPINFER_GEMM_EXPERT_SWAP", "DEEPINFER_GEMM_EXPERT_SWAP_SMALL",
    "DEEPINFER_GEMM_EXPERT_SWAP_CTAS", "DEEPINFER_GEMM_EXPERT_TRIM", "DEEPINFER_GEMM_PREPACK_MB",
    "DEEPINFER_GEMM_EXPERT_PRODUCERS", "DEEPINFER_MOE_SWIGLU_QUANT",
    "DEEPINFER_MOE_QUANT_ONCE", "DEEPINFER_MOE_SHARED_LATE_JOIN", "DEEPINFER_GEMM_PREQUANT", "DEEPINFER_MOE_COMBINE_CHUNK", "DEEPINFER_HC_SINKHORN_CTA",
    "DEEPINFER_TOPK_SMEM", "DEEPINFER_SAMPLE_DRAW_FIRST",
    "DEEPINFER_HADAMARD_WARP", "DEEPINFER_HC_VEC_COLLAPSE", "DEEPINFER_ATTN_WGMMA_MIN_TOKENS",
    "DEEPINFER_ATTN_WGMMA_WARPGROUPS", "DEEPINFER_ATTN_CLUSTER", "DEEPINFER_HC_CLUSTER",
    "DEEPINFER_GEMM_EVICT_FIRST", "DEEPINFER_GEMM_FP8_ORDER", "DEEPINFER_FP8_MMA_MODEL", "DEEPINFER_GEMM_FP8_TILES", "DEEPINFER_GEMM_FP8_WIDE_TILES", "DEEPINFER_GEMM_FP8_DECODE_ROWS", "DEEPINFER_GEMM_FP8_SPLIT", "DEEPINFER_GEMM_FP8_SMALL_TILES", "DEEPINFER_GEMM_FP8_CONSUMERS", "DEEPINFER_GEMM_FP8_EXPERTS", "DEEPINFER_GEMM_FP8_EXPERTS_LEAN", "DEEPINFER_GEMM_FP8_EXPERTS_LEAN_GROUPS", "DEEPINFER_GEMM_L2_PREFETCH",
    // CUDA programmatic dependent launch of the small-M GEMM (default on; 0 = plain launches).
    "DEEPINFER_CUDA_PDL",
};

std::string known_list() {
  std::string out;
  for (const char* k : kKnownVariables) out += (out.empty() ? "" : ", ") + std::string(k);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<bool> parse_bool(std::string_view name, std::string_view value) {
  const std::string v = lower(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return invalid_argument("{}='{}' is not a boolean (use 1/0, true/false, yes/no or on/off)", name, value);
}

Result<int32_t> parse_count(std::string_view name, std::string_view value) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || n < 0 || n > INT32_MAX) {
    return invalid_argument("{}='{}' is not a non-negative integer", name, value);
  }
  return static_cast<int32_t>(n);
}

Result<std::string> parse_accelerator(std::string_view value) {
  const std::string v = lower(value);
  if (v == "cpu") return std::string("cpu");
  if (v == "cuda" || v == "nvidia") return std::string("cuda");
  if (v == "auto") return std::string("auto");
  return invalid_argument("DEEPINFER_ACCELERATOR='{}' is not supported (use auto, cpu, or cuda/nvidia)", value);
}

// Applies one known variable to `o`.
Status apply_variable(std::string_view name, std::string_view value, EngineOptions* o) {
  if (name == "DEEPINFER_ACCELERATOR") {
    DI_ASSIGN_OR_RETURN(o->device, parse_accelerator(value));
  } else if (name == "DEEPINFER_ENABLE_MTP_VARLEN") {
    DI_ASSIGN_OR_RETURN(o->mtp_varlen, parse_bool(name, value));
  } else if (name == "DEEPINFER_USE_NEXTN_DECODE") {
    DI_ASSIGN_OR_RETURN(o->nextn_decode, parse_count(name, value));
  } else if (name == "DEEPINFER_BATCH_INVARIANT") {
    DI_ASSIGN_OR_RETURN(o->batch_invariant, parse_bool(name, value));
  } else if (name == "DEEPINFER_ASYNC_SCHEDULING") {
    DI_ASSIGN_OR_RETURN(o->async_scheduling, parse_bool(name, value));
  } else if (name == "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE") {
    const std::string v = lower(value);
    if (v != "compact" && v != "none") {
      return invalid_argument("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE='{}' must be compact or none", value);
    }
    o->yoco_prefill_mode = v;
  } else if (name == "DEEPINFER_SPEC_VERIFICATION") {
    const std::string v = lower(value);
    if (v != "rejection" && v != "coupled") {
      return invalid_argument("DEEPINFER_SPEC_VERIFICATION='{}' must be rejection or coupled", value);
    }
    o->spec_verification = v;
  } else if (name == "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS") {
    DI_ASSIGN_OR_RETURN(o->yoco_keep_tokens, parse_count(name, value));
  } else if (name == "DEEPINFER_LOG_LEVEL") {
    LogLevel level;
    if (!parse_log_level(lower(value), &level)) {
      return invalid_argument("DEEPINFER_LOG_LEVEL='{}' must be debug, info, warn, error or off", value);
    }
    o->log_level = lower(value);
  }
  // DEEPINFER_HF_MODEL_DIR, _CACHE_DIR and _TOKENIZER are read where they are used (model.h,
  // tokenizer.h); they are listed as known so they do not warn.
  return Status::ok();
}

bool is_known(std::string_view name) {
  for (const char* k : kKnownVariables) {
    if (name == k) return true;
  }
  return false;
}

Status check_positive(const char* field, int64_t value) {
  if (value <= 0) return invalid_argument("{} = {} must be > 0", field, value);
  return Status::ok();
}

Status check_non_negative(const char* field, int64_t value) {
  if (value < 0) return invalid_argument("{} = {} must be >= 0", field, value);
  return Status::ok();
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Result<EngineOptions> EngineOptions::with_environment(EngineOptions base, const std::vector<std::string>& env,
                                                      std::vector<std::string>* warnings) {
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string_view name = std::string_view(entry).substr(0, eq);
    const std::string_view value = std::string_view(entry).substr(eq + 1);
    if (name.substr(0, 10) != "DEEPINFER_") continue;
    if (!is_known(name)) {
      warnings->push_back(fmt::format("unknown environment variable {} is ignored (known: {})", name, known_list()));
      continue;
    }
    DI_RETURN_IF_ERROR(apply_variable(name, value, &base));
  }
  return base;
}

Result<EngineOptions> EngineOptions::with_environment(EngineOptions base) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "DEEPINFER_", 10) == 0) env.emplace_back(*e);
  }
  std::vector<std::string> warnings;
  DI_ASSIGN_OR_RETURN(EngineOptions out, with_environment(std::move(base), env, &warnings));
  for (const std::string& w : warnings) log_warn("{}", w);
  return out;
}

Status EngineOptions::validate() const {
  if (device != "auto" && device != "cpu" && device != "cuda") {
    return invalid_argument("device '{}' must be auto, cpu or cuda", device);
  }
  if (numerics != "official" && numerics != "plain") {
    return invalid_argument("numerics '{}' must be official or plain", numerics);
  }
  DI_RETURN_IF_ERROR(check_positive("max_num_seqs", max_num_seqs));
  DI_RETURN_IF_ERROR(check_positive("max_num_batched_tokens", max_num_batched_tokens));
  DI_RETURN_IF_ERROR(check_non_negative("max_prefill_chunk", max_prefill_chunk));
  DI_RETURN_IF_ERROR(check_non_negative("max_model_len", max_model_len));
  DI_RETURN_IF_ERROR(check_positive("block_tokens", block_tokens));
  DI_RETURN_IF_ERROR(check_non_negative("kv_blocks", kv_blocks));
  DI_RETURN_IF_ERROR(check_non_negative("kv_cache_bytes", kv_cache_bytes));
  DI_RETURN_IF_ERROR(check_non_negative("n_snapshot_slots", n_snapshot_slots));
  DI_RETURN_IF_ERROR(check_non_negative("snapshot_interval_tokens", snapshot_interval_tokens));
  if (block_tokens > 0 && snapshot_interval_tokens % block_tokens != 0) {
    return invalid_argument("snapshot_interval_tokens = {} must be a multiple of block_tokens = {}",
                            snapshot_interval_tokens, block_tokens);
  }
  DI_RETURN_IF_ERROR(check_non_negative("yoco_keep_tokens", yoco_keep_tokens));
  DI_RETURN_IF_ERROR(check_non_negative("nextn_decode", nextn_decode));
  if (!(draft_min_survival >= 0.0f && draft_min_survival < 1.0f)) {
    return invalid_argument("draft_min_survival = {} must be in [0, 1)", draft_min_survival);
  }
  if (replay_mode != "bounded" && replay_mode != "exact") {
    return invalid_argument("replay_mode '{}' must be bounded or exact", replay_mode);
  }
  if (spec_verification != "rejection" && spec_verification != "coupled") {
    return invalid_argument("spec_verification '{}' must be rejection or coupled", spec_verification);
  }
  if (yoco_prefill_mode != "compact" && yoco_prefill_mode != "none") {
    return invalid_argument("yoco_prefill_mode '{}' must be compact or none", yoco_prefill_mode);
  }
  LogLevel level;
  if (!log_level.empty() && !parse_log_level(log_level, &level)) {
    return invalid_argument("log_level '{}' must be debug, info, warn, error or off", log_level);
  }
  return Status::ok();
}

}  // namespace deepinfer

// End to end through the `deepinfer` binary on the tiny demo model: `generate` with no arguments
// (the `./dev.sh run` path), JSONL in and out with a progress bar, agreement with the C++ Engine
// for the same request, bad arguments, a scripted non-interactive `chat` session, and `bench`.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "deepinfer/engine.h"
#include "e2e_util.h"

namespace deepinfer {
namespace {

using testing::run_shell;

const std::string kCli = DI_CLI_BINARY;

std::string model_flag() { return " --model " + testing::tiny_model_dir() + " --kv-blocks 32 "; }

TEST(CliE2eTest, GenerateWithoutArgumentsRunsTheDemo) {
  const auto r = run_shell("DEEPINFER_CACHE_DIR=" + testing::demo_cache_dir() + " OMP_NUM_THREADS=1 " + kCli +
                           " generate --max-tokens 8 --kv-blocks 16");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("DeepInfer demo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=== prompt 0"), std::string::npos);
  EXPECT_NE(r.out.find("The three most important ideas in computer science are"), std::string::npos);
  EXPECT_NE(r.out.find("(8 tokens, finish: length)"), std::string::npos) << r.out;
}

// Two first runs at once on a machine without the demo model (a fresh cache): both generate it
// or wait for the other's, and both answer (they used to write one .partial folder together,
// each removing what the other wrote).
TEST(CliE2eTest, TwoFirstRunsAtOnceBothGetTheDemoModel) {
  const std::string cache = testing::temp_path("fresh-cache");
  std::filesystem::remove_all(cache);
  const std::string one = "DEEPINFER_CACHE_DIR=" + cache + " OMP_NUM_THREADS=1 " + kCli +
                          " generate --max-tokens 2 --kv-blocks 16 --ids '0 5 9'";
  const auto r = run_shell("(" + one + " > " + cache + ".a 2>&1; echo $? > " + cache + ".a.rc) & (" + one + " > " +
                           cache + ".b 2>&1; echo $? > " + cache + ".b.rc) & wait; cat " + cache + ".a.rc " + cache +
                           ".b.rc");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "0\n0\n") << testing::run_shell("cat " + cache + ".a " + cache + ".b").out;
  EXPECT_TRUE(std::filesystem::exists(cache + "/models/demo-tiny-v4f-seed0/config.json"));
  EXPECT_FALSE(std::filesystem::exists(cache + "/models/demo-tiny-v4f-seed0.partial"));
  std::filesystem::remove_all(cache);
}

TEST(CliE2eTest, JsonlInAndOutMatchesTheEngine) {
  const std::string in = testing::temp_path("prompts.jsonl"), out = testing::temp_path("out.jsonl");
  std::ofstream(in) << R"({"prompt": "Hello, my name is", "id": "a"})" << "\n"
                    << R"({"prompt_token_ids": [0, 1000, 2000, 3000], "max_tokens": 3, "seed": 11})" << "\n"
                    << "\n"
                    << R"("The future of AI is")" << "\n";
  const auto r = run_shell(kCli + " generate" + model_flag() + "--prompts-jsonl " + in + " --output-jsonl " + out +
                               " --max-tokens 5 --seed 7 --temperature 0.7 --ignore-eos --progress",
                           /*merge_stderr=*/true);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("3/3 requests"), std::string::npos) << r.out;  // the progress bar
  std::ifstream f(out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], "a");
  EXPECT_EQ(lines[0]["prompt"], "Hello, my name is");
  EXPECT_EQ(lines[0]["token_ids"].size(), 5u);
  EXPECT_EQ(lines[0]["finish_reason"], "length");
  EXPECT_EQ(lines[0]["usage"]["completion_tokens"], 5);
  EXPECT_EQ(lines[0]["usage"]["prompt_tokens"], lines[0]["prompt_token_ids"].size());
  EXPECT_EQ(lines[0]["outputs"][0]["text"], lines[0]["text"]);
  EXPECT_EQ(lines[1]["prompt_token_ids"], nlohmann::json({0, 1000, 2000, 3000}));
  EXPECT_EQ(lines[1]["token_ids"].size(), 3u);
  EXPECT_EQ(lines[2]["index"], 2);

  // The same requests through the C++ Engine give the same tokens.
  EngineOptions o;
  o.model = testing::tiny_model_dir();
  o.kv_blocks = 32;
  auto engine = Engine::open(o);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  Request a;
  a.prompt = "Hello, my name is";
  a.sampling.max_tokens = 5;
  a.sampling.seed = 7;
  a.sampling.temperature = 0.7f;
  a.sampling.ignore_eos = true;
  Request b = a;
  b.prompt.clear();
  b.prompt_ids = {0, 1000, 2000, 3000};
  b.sampling.max_tokens = 3;
  b.sampling.seed = 11;
  auto outs = (*engine)->generate({a, b});
  ASSERT_TRUE(outs.is_ok());
  EXPECT_EQ(lines[0]["token_ids"].get<std::vector<int32_t>>(), (*outs)[0].sequences[0].token_ids);
  EXPECT_EQ(lines[0]["text"].get<std::string>(), (*outs)[0].sequences[0].text);
  EXPECT_EQ(lines[1]["token_ids"].get<std::vector<int32_t>>(), (*outs)[1].sequences[0].token_ids);
}

TEST(CliE2eTest, IdsPromptsAndJsonlToStdout) {
  const auto r = run_shell(kCli + " generate" + model_flag() + "--ids '0 5 6 7' '0,8,9' --max-tokens 2 --n 2 "
                           "--seed 1 --output-jsonl - --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<nlohmann::json> lines;
  std::istringstream s(r.out);
  for (std::string line; std::getline(s, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["prompt_token_ids"], nlohmann::json({0, 8, 9}));
  EXPECT_EQ(lines[0]["outputs"].size(), 2u);
  EXPECT_FALSE(lines[0].contains("prompt_logprobs"));

  // --prompt-logprobs / --logprobs: one entry per prompt token (null first), each the prompt
  // token's with its rank and the top N; generated tokens' entries carry their ranks too.
  const auto lp = run_shell(kCli + " generate" + model_flag() + "--ids '0 5 6 7' --max-tokens 2 --seed 1 "
                            "--prompt-logprobs 1 --logprobs 2 --output-jsonl - --no-progress");
  ASSERT_EQ(lp.status, 0) << lp.out;
  const nlohmann::json j = nlohmann::json::parse(lp.out);
  const nlohmann::json& prompt = j["prompt_logprobs"];
  ASSERT_EQ(prompt.size(), 4u) << j.dump();
  EXPECT_TRUE(prompt[0].is_null());
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(prompt[i]["token"], j["prompt_token_ids"][i]);
    EXPECT_GE(prompt[i]["rank"].get<int>(), 1);
    EXPECT_EQ(prompt[i]["top_logprobs"].size(), 1u);
    EXPECT_LE(prompt[i]["logprob"].get<double>(), 0.0);
  }
  const nlohmann::json& generated = j["outputs"][0]["logprobs"];
  ASSERT_EQ(generated.size(), 2u);
  for (const nlohmann::json& t : generated) {
    EXPECT_GE(t["rank"].get<int>(), 1);
    EXPECT_EQ(t["top_logprobs"].size(), 2u);
  }
  EXPECT_NE(run_shell(kCli + " generate" + model_flag() + "--ids '0 5' --prompt-logprobs 21 --no-progress", true).status, 0);
}

// V4.1-Flash end to end through the CLI: the embedded tiny V4.1 (512-id vocabulary, so id prompts).
TEST(CliE2eTest, GeneratesWithTheV41DemoModel) {
  const std::string cmd = "DEEPINFER_CACHE_DIR=" + testing::demo_cache_dir() + " OMP_NUM_THREADS=1 " + kCli +
                          " generate --model demo-v41 --kv-blocks 16 --ids '0 5 9 17 33 64 100 200 300 400 "
                          "401 402' --max-tokens 6 --temperature 0 --output-jsonl - --no-progress";
  const auto a = run_shell(cmd), b = run_shell(cmd);
  ASSERT_EQ(a.status, 0) << a.out;
  const auto j = nlohmann::json::parse(a.out);
  const auto ids = j["token_ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 6u);
  for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < 512) << id;
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(a.out, b.out);  // greedy and deterministic
}

// An image through the CLI (--image) on the embedded tiny V4.1: its placeholder (id 510) becomes the
// span of a 40 x 30 PNG (written by Python's zlib here); a file that is no image is refused by name,
// and so are more images than placeholders.
TEST(CliE2eTest, GeneratesWithAnImageOnTheV41DemoModel) {
  const std::string dir = ::testing::TempDir() + "/cli_image";
  const std::string png = dir + "/picture.png", bad = dir + "/notes.txt", script = dir + "/write_png.py";
  ASSERT_EQ(run_shell("mkdir -p " + dir + " && echo hello > " + bad).status, 0);
  std::ofstream(script) << "import struct, sys, zlib\n"
                           "w, h = 40, 30\n"
                           "raw = b''.join(b'\\x00' + bytes((x * 6 + y * 3 + c * 80) % 256 for x in range(w) for c in range(3))\n"
                           "              for y in range(h))\n"
                           "def chunk(t, d):\n"
                           "    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n"
                           "open(sys.argv[1], 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))\n"
                           "                             + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\n";
  const std::string write = "python3 " + script + " " + png;
  ASSERT_EQ(run_shell(write).status, 0);
  const std::string cmd = "DEEPINFER_CACHE_DIR=" + testing::demo_cache_dir() + " OMP_NUM_THREADS=1 " + kCli +
                          " generate --model demo-v41 --kv-blocks 16 --ids '0 5 9 510 17 33' --max-tokens 6 "
                          "--temperature 0 --output-jsonl - --no-progress --image ";
  const auto a = run_shell(cmd + png), b = run_shell(cmd + png);
  ASSERT_EQ(a.status, 0) << a.out;
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["token_ids"].size(), 6u);
  EXPECT_EQ(a.out, b.out);
  const auto refused = run_shell(cmd + bad, true);
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.out.find("images[0]"), std::string::npos) << refused.out;
  const auto two = run_shell(cmd + png + " --image " + png, true);  // one placeholder, two images
  EXPECT_NE(two.status, 0);
  EXPECT_NE(two.out.find("1 image placeholder(s)"), std::string::npos) << two.out;
}

// Speculative decoding through the CLI flags: the demo model's MTP drafts (V4) and DSpark drafts
// (V4.1), confidence-scheduled or fixed, verified by the coupled rule, give the output of decoding
// without them; rejection sampling (the default) runs, seeded: the same output twice.
TEST(CliE2eTest, SpeculativeDecodingFlagsKeepTheOutput) {
  const std::string ids = " --ids '0 5 9 17 33 64 100 200 300 400 401 402' --max-tokens 10 --seed 3 "
                          "--temperature 0.7 --output-jsonl - --no-progress";
  const std::string v4 = kCli + " generate" + model_flag() + ids.substr(1);
  const std::string v41 = "DEEPINFER_CACHE_DIR=" + testing::demo_cache_dir() + " OMP_NUM_THREADS=1 " + kCli +
                          " generate --model demo-v41 --kv-blocks 16" + ids;
  for (const std::string& cmd : {v4, v41}) {
    const auto plain = run_shell(cmd);
    ASSERT_EQ(plain.status, 0) << plain.out;
    const auto fixed = run_shell(cmd + " --nextn-decode 2 --spec-verification coupled");
    ASSERT_EQ(fixed.status, 0) << fixed.out;
    EXPECT_EQ(fixed.out, plain.out) << cmd;
    const auto varlen = run_shell("DEEPINFER_ENABLE_MTP_VARLEN=1 DEEPINFER_SPEC_VERIFICATION=coupled " + cmd +
                                  " --draft-min-survival 0.01");
    ASSERT_EQ(varlen.status, 0) << varlen.out;
    EXPECT_EQ(varlen.out, plain.out) << cmd;
    const auto rejection = run_shell(cmd + " --nextn-decode 2");
    ASSERT_EQ(rejection.status, 0) << rejection.out;
    EXPECT_EQ(run_shell(cmd + " --nextn-decode 2").out, rejection.out) << cmd;
  }
  const auto bad = run_shell(v4 + " --nextn-decode 2 --draft-min-survival 2", true);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("draft_min_survival"), std::string::npos) << bad.out;
  const auto bad_rule = run_shell(v4 + " --nextn-decode 2 --spec-verification typical", true);
  EXPECT_NE(bad_rule.status, 0);
  EXPECT_NE(bad_rule.out.find("spec-verification"), std::string::npos) << bad_rule.out;
}

TEST(CliE2eTest, RegexConstrainsTheOutput) {
  const auto r = run_shell(kCli + " generate" + model_flag() + "--regex '(red|green|blue)' --seed 4 --output-jsonl - "
                           "'My favourite colour is'");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const std::string text = j["text"];
  EXPECT_TRUE(text == "red" || text == "green" || text == "blue") << text;
  EXPECT_EQ(j["finish_reason"], "stop");
}

TEST(CliE2eTest, BadArgumentsExitWithAMessage) {
  auto r = run_shell(kCli + " generate" + model_flag() + "--temperature -1 hi", true);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("temperature = -1"), std::string::npos) << r.out;
  r = run_shell(kCli + " generate --model no-such-org/no-such-model hi", true);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("Looked in"), std::string::npos) << r.out;
  r = run_shell(kCli + " generate" + model_flag() + "--ids 'x y'", true);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'x' is not a token id"), std::string::npos) << r.out;
  r = run_shell("DEEPINFER_USE_NEXTN_DECODE=many " + kCli + " generate" + model_flag() + "hi", true);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("DEEPINFER_USE_NEXTN_DECODE='many'"), std::string::npos) << r.out;
}

// `deepinfer bench` on the CPU with the tiny model: a decode and a prefill row with their
// throughput and shares, the command recorded, per-op breakdowns of the loaded model's forwards
// (one forward's calls: one embedding, a MoE call per layer); --iters 0 is refused with a message.
TEST(CliE2eTest, BenchWritesDecodeAndPrefillRows) {
  const std::string out = testing::temp_path("bench.json");
  auto r = run_shell("OMP_NUM_THREADS=1 " + kCli + " bench --model " + testing::tiny_model_dir() +
                         " --device cpu --batch 1 --context 64 --prefill 32 --iters 2 --out " + out,
                     true);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j.at("rows").size(), 2u) << j.dump();
  EXPECT_EQ(j["rows"][0]["kind"], "decode");
  EXPECT_EQ(j["rows"][1]["kind"], "prefill");
  for (const auto& row : j["rows"]) EXPECT_GT(row.at("tokens_per_s").get<double>(), 0.0) << row.dump();
  EXPECT_NE(j.at("command").get<std::string>().find("--iters 2"), std::string::npos) << j["command"];
  const int64_t layers = j.at("model").at("layers").get<int64_t>();
  for (const char* key : {"decode_breakdown", "prefill_breakdown"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    const nlohmann::json& b = j[key];
    ASSERT_TRUE(b.contains("embed") && b.contains("moe_experts")) << key << ": " << b.dump();
    EXPECT_EQ(b["embed"]["calls"], 1) << key;
    EXPECT_EQ(b["moe_experts"]["calls"], layers) << key;
    EXPECT_GT(b["moe_experts"]["ms"].get<double>(), 0.0) << key;
    EXPECT_FALSE(j.at(std::string(key) + "_by_linear").empty()) << key;
  }
  // --batch 0: a prefill-only run (the kernel profiles' launch sequence has no decode warm-up).
  const std::string out0 = testing::temp_path("bench_prefill_only.json");
  r = run_shell("OMP_NUM_THREADS=1 " + kCli + " bench --model " + testing::tiny_model_dir() +
                    " --device cpu --batch 0 --context 64 --prefill 32 --iters 1 --no-breakdown --out " + out0,
                true);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream f0(out0);
  const nlohmann::json j0 = nlohmann::json::parse(f0);
  ASSERT_EQ(j0.at("rows").size(), 1u) << j0.dump();
  EXPECT_EQ(j0["rows"][0]["kind"], "prefill");
  EXPECT_FALSE(j0.contains("prefill_breakdown")) << "--no-breakdown";
  // A row whose KV does not fit the budget keeps every field of a row, its figures null, and says why.
  const std::string out_skip = testing::temp_path("bench_skipped.json");
  r = run_shell("OMP_NUM_THREADS=1 " + kCli + " bench --model " + testing::tiny_model_dir() +
                    " --device cpu --batch 1 --context 64 --prefill 0 --iters 1 --no-breakdown --memory-budget-gib 1e-9 --out " +
                    out_skip,
                true);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream fs(out_skip);
  const nlohmann::json js = nlohmann::json::parse(fs);
  ASSERT_EQ(js.at("rows").size(), 1u) << js.dump();
  const nlohmann::json& skipped = js["rows"][0];
  EXPECT_NE(skipped.at("skipped").get<std::string>().find("memory budget"), std::string::npos) << skipped.dump();
  for (const char* key : {"kind", "batch", "context", "model", "tokens_per_s", "hbm_roofline_pct", "tensor_peak_pct"}) {
    EXPECT_TRUE(skipped.contains(key)) << key;
  }
  EXPECT_TRUE(skipped["tokens_per_s"].is_null());
  r = run_shell(kCli + " bench --model " + testing::tiny_model_dir() + " --device cpu --iters 0", true);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--iters must be >= 1 (got 0)"), std::string::npos) << r.out;
}

TEST(CliE2eTest, ChatReadsLinesFromStdin) {
  const auto r = run_shell("printf 'Hello\\n/think\\nWhy?\\n/reset\\n/nothink\\nBye\\n/exit\\nignored\\n' | " + kCli +
                           " chat" + model_flag() + "--max-tokens 6 --seed 3 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("[thinking mode on]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[conversation cleared]"), std::string::npos);
  EXPECT_NE(r.out.find("[thinking mode off]"), std::string::npos);
  size_t n_turns = 0;
  for (size_t p = 0; (p = r.out.find("[length, 6 tokens]", p)) != std::string::npos; ++p) ++n_turns;
  EXPECT_EQ(n_turns, 3u) << r.out;  // "ignored" after /exit is not answered
  EXPECT_NE(r.out.find("[reasoning]"), std::string::npos) << r.out;  // the thinking turn
}

}  // namespace
}  // namespace deepinfer

// Server overhead benchmark (issue 8): the same generation workload through the offline API
// (Engine::submit from this process) and through `deepinfer serve`'s HTTP stack (an in-process
// ApiServer on the same engine, driven over loopback by sse_load_client as a separate process),
// at several concurrencies. Every request has the same prompt and generates exactly max_tokens
// tokens (ignore_eos, greedy), so both modes do the same engine work. Reports tokens/s, mean TTFT,
// mean time per output token (TPOT) per stream, and this process's CPU time per token; the
// differences are the server's overhead. One JSON document on stdout.
//
//   server_overhead_bench [--model demo] [--device cpu] [--streams 1,64,512] [--max-tokens 32]
//                         [--prompt-len 16] [--repeats 1]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api_server.h"
#include "deepinfer/engine.h"

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model = "demo";
  std::string device = "cpu";
  std::vector<int> streams = {1, 64, 512};
  int max_tokens = 32;
  int prompt_len = 16;
  int repeats = 1;
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::vector<int32_t> prompt_ids(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + 37 * i % 500);  // valid in every vocabulary (micro: 512)
  return ids;
}

Json run_offline(deepinfer::Engine& engine, const Args& a, int n_streams) {
  struct Rec {
    Clock::time_point first, last;
    int n_tokens = 0;
  };
  std::vector<Rec> recs(static_cast<size_t>(n_streams));
  std::mutex mu;
  std::condition_variable cv;
  int n_done = 0;
  double cpu0 = cpu_seconds();
  auto t0 = Clock::now();
  for (int i = 0; i < n_streams; ++i) {
    deepinfer::Request r;
    r.prompt_ids = prompt_ids(a.prompt_len);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = a.max_tokens;
    r.sampling.ignore_eos = true;
    auto id = engine.submit(std::move(r), [&, i](const deepinfer::TokenEvent& e) {
      auto now = Clock::now();
      std::lock_guard lock(mu);
      Rec& rec = recs[static_cast<size_t>(i)];
      if (rec.n_tokens == 0 && !e.token_ids.empty()) rec.first = now;
      rec.n_tokens += static_cast<int>(e.token_ids.size());
      rec.last = now;
      if (e.finish && ++n_done == n_streams) cv.notify_all();
    });
    if (!id.is_ok()) {
      std::fprintf(stderr, "submit: %s\n", id.status().to_string().c_str());
      std::exit(1);
    }
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return n_done == n_streams; });
  double cpu = cpu_seconds() - cpu0;
  Clock::time_point end = t0;
  double ttft = 0, tpot = 0;
  int64_t tokens = 0;
  for (const Rec& r : recs) {
    end = std::max(end, r.last);
    tokens += r.n_tokens;
    ttft += std::chrono::duration<double, std::milli>(r.first - t0).count();
    if (r.n_tokens > 1) tpot += std::chrono::duration<double, std::milli>(r.last - r.first).count() / (r.n_tokens - 1);
  }
  double wall = std::chrono::duration<double>(end - t0).count();
  return Json{{"tokens", tokens}, {"wall_s", wall}, {"tokens_per_s", tokens / wall},
              {"ttft_ms_mean", ttft / n_streams}, {"tpot_ms_mean", tpot / n_streams},
              {"cpu_ms_per_token", 1000 * cpu / static_cast<double>(tokens)}};
}

Json run_server(int port, const Args& a, int n_streams) {
  Json body{{"model", "bench"}, {"prompt", prompt_ids(a.prompt_len)}, {"max_tokens", a.max_tokens},
            {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  std::string command = std::string(DI_SSE_LOAD_CLIENT) + " --port " + std::to_string(port) +
                        " --path /v1/completions --conns " + std::to_string(n_streams) + " --body '" + body.dump() + "'";
  double cpu0 = cpu_seconds();
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  int rc = pclose(pipe);
  double cpu = cpu_seconds() - cpu0;
  Json r = Json::parse(out, nullptr, false);
  if (rc != 0 || r.is_discarded() || r["ok"] != n_streams) {
    std::fprintf(stderr, "load client failed (rc %d): %s\n", rc, out.c_str());
    std::exit(1);
  }
  int64_t tokens = r["completion_tokens"];
  return Json{{"tokens", tokens}, {"wall_s", r["wall_s"]}, {"tokens_per_s", r["tokens_per_s"]},
              {"ttft_ms_mean", r["ttft_ms_mean"]}, {"tpot_ms_mean", r["tpot_ms_mean"]},
              {"cpu_ms_per_token", 1000 * cpu / static_cast<double>(tokens)}};
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") a.model = v;
    else if (k == "--device") a.device = v;
    else if (k == "--max-tokens") a.max_tokens = std::atoi(v.c_str());
    else if (k == "--prompt-len") a.prompt_len = std::atoi(v.c_str());
    else if (k == "--repeats") a.repeats = std::atoi(v.c_str());
    else if (k == "--streams") {
      a.streams.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) a.streams.push_back(std::atoi(item.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  deepinfer::EngineOptions options;
  options.model = a.model;
  options.device = a.device;
  int max_streams = 1;
  for (int n : a.streams) max_streams = std::max(max_streams, n);
  options.max_num_seqs = max_streams;
  options.max_num_batched_tokens = std::max(2048, max_streams * 2);
  options.max_model_len = a.prompt_len + a.max_tokens + 16;
  auto engine = deepinfer::Engine::open(options);
  if (!engine.is_ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  deepinfer::server::ServerOptions so;
  so.http.port = 0;
  so.access_log = false;
  so.served_model_names = {"bench"};
  auto server = deepinfer::server::ApiServer::start(**engine, so);
  if (!server.is_ok()) return 1;
  run_offline(**engine, a, 1);  // warm-up (allocations, caches)
  run_server((*server)->port(), a, 1);
  Json results = Json::array();
  for (int n : a.streams) {
    for (int rep = 0; rep < a.repeats; ++rep) {
      Json offline = run_offline(**engine, a, n);
      Json online = run_server((*server)->port(), a, n);
      Json overhead{{"throughput_ratio", online["tokens_per_s"].get<double>() / offline["tokens_per_s"].get<double>()},
                    {"added_tpot_ms", online["tpot_ms_mean"].get<double>() - offline["tpot_ms_mean"].get<double>()},
                    {"added_ttft_ms", online["ttft_ms_mean"].get<double>() - offline["ttft_ms_mean"].get<double>()},
                    {"added_cpu_ms_per_token",
                     online["cpu_ms_per_token"].get<double>() - offline["cpu_ms_per_token"].get<double>()}};
      Json row{{"streams", n}, {"offline", offline}, {"server", online}, {"overhead", overhead}};
      std::fprintf(stderr, "%s\n", row.dump().c_str());
      results.push_back(row);
    }
  }
  (*server)->shutdown();
  (*engine)->shutdown(false);
  Json doc{{"model", (*engine)->model_dir()}, {"max_tokens", a.max_tokens}, {"prompt_len", a.prompt_len}, {"results", results}};
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

// Loopback SSE load generator for the HTTP-stack measurement and the server benchmark: opens N
// connections at once (epoll, one thread), POSTs the same JSON body on each, and reads the
// streams. Reports time to first event, gaps between events, server-stamped delivery latency
// ("t": steady-clock ns in the event, same machine), completion tokens from usage chunks, and the
// server process's CPU time, peak RSS and thread count (from /proc). One JSON object on stdout.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Options {
  int port = 8000;
  std::string path = "/stream";
  std::string body = "{}";
  int n_conns = 100;
  int pid = 0;  // server pid for /proc sampling (0: none)
  std::string api_key;
  double timeout_s = 300;
};

struct Conn {
  int fd = -1;
  std::string out;  // request bytes not yet sent
  std::string in;   // unparsed bytes
  int64_t t_start = 0, t_first = 0, t_last = 0;
  int n_events = 0;
  int64_t n_tokens = 0;  // from "completion_tokens"/"output_tokens" in usage
  bool done = false, failed = false;
};

struct ProcSample {
  double cpu_s = 0;
  long rss_kb = 0;
  int threads = 0;
};

ProcSample sample_proc(int pid) {
  ProcSample s;
  if (pid <= 0) return s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close_paren = line.rfind(')');
  if (close_paren != std::string::npos) {
    std::istringstream rest(line.substr(close_paren + 2));
    std::string field;
    std::vector<std::string> f;
    while (rest >> field) f.push_back(field);
    // Fields after the command: state is f[0]; utime = f[11], stime = f[12].
    if (f.size() > 12) s.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::atol(line.c_str() + 6);
    if (line.rfind("Threads:", 0) == 0) s.threads = std::atoi(line.c_str() + 8);
  }
  return s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int64_t number_after(const std::string& s, size_t pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == ':')) ++pos;
  return std::strtoll(s.c_str() + pos, nullptr, 10);
}

// Consumes complete SSE lines of `c.in`; chunk-size lines of the chunked encoding are ignored.
void parse_lines(Conn& c, std::vector<double>* gaps_ms, std::vector<double>* delivery_ms) {
  size_t start = 0;
  for (;;) {
    size_t nl = c.in.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = c.in.substr(start, nl - start);
    start = nl + 1;
    if (line.rfind("data: ", 0) != 0) continue;
    int64_t t = now_ns();
    if (line.find("[DONE]") != std::string::npos || line.find("message_stop") != std::string::npos ||
        line.find("response.completed") != std::string::npos) {
      c.done = true;
    }
    for (const char* key : {"\"completion_tokens\"", "\"output_tokens\""}) {
      size_t k = line.find(key);
      if (k != std::string::npos) c.n_tokens = std::max(c.n_tokens, number_after(line, k + std::strlen(key)));
    }
    size_t ts = line.find("{\"t\":");
    if (ts != std::string::npos) delivery_ms->push_back((t - number_after(line, ts + 5)) / 1e6);
    if (c.n_events == 0) c.t_first = t;
    else gaps_ms->push_back((t - c.t_last) / 1e6);
    c.t_last = t;
    ++c.n_events;
  }
  c.in.erase(0, start);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--port") o.port = std::atoi(v.c_str());
    else if (k == "--path") o.path = v;
    else if (k == "--body-file") { std::ifstream f(v); std::stringstream ss; ss << f.rdbuf(); o.body = ss.str(); }
    else if (k == "--body") o.body = v;
    else if (k == "--conns") o.n_conns = std::atoi(v.c_str());
    else if (k == "--pid") o.pid = std::atoi(v.c_str());
    else if (k == "--api-key") o.api_key = v;
    else if (k == "--timeout") o.timeout_s = std::atof(v.c_str());
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); std::exit(2); }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  std::string request = "POST " + o.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  if (!o.api_key.empty()) request += "Authorization: Bearer " + o.api_key + "\r\n";
  request += "Content-Length: " + std::to_string(o.body.size()) + "\r\nConnection: close\r\n\r\n" + o.body;

  int ep = epoll_create1(0);
  std::vector<Conn> conns(o.n_conns);
  ProcSample before = sample_proc(o.pid), peak;
  int64_t t0 = now_ns();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < o.n_conns; ++i) {
    Conn& c = conns[i];
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    c.out = request;
    c.t_start = now_ns();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  std::vector<double> ttft_ms, gaps_ms, delivery_ms, tpot_ms;
  int n_open = o.n_conns;
  std::vector<epoll_event> events(1024);
  char buf[65536];
  int64_t last_sample = 0;
  while (n_open > 0 && (now_ns() - t0) / 1e9 < o.timeout_s) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int k = 0; k < n; ++k) {
      Conn& c = conns[events[k].data.u32];
      if (c.fd < 0) continue;
      if ((events[k].events & EPOLLOUT) && !c.out.empty()) {
        ssize_t w = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (w > 0) c.out.erase(0, static_cast<size_t>(w));
        if (c.out.empty()) {
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;
          ev.data.u32 = events[k].data.u32;
          epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        }
      }
      if (events[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
          if (r > 0) { c.in.append(buf, static_cast<size_t>(r)); continue; }
          if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          // EOF or error: the stream is over.
          parse_lines(c, &gaps_ms, &delivery_ms);
          if (!c.done) c.failed = true;
          close(c.fd);
          c.fd = -1;
          --n_open;
          break;
        }
        if (c.fd >= 0) parse_lines(c, &gaps_ms, &delivery_ms);
      }
    }
    if (now_ns() - last_sample > 100'000'000) {
      last_sample = now_ns();
      ProcSample s = sample_proc(o.pid);
      peak.rss_kb = std::max(peak.rss_kb, s.rss_kb);
      peak.threads = std::max(peak.threads, s.threads);
    }
  }
  int64_t t_end = now_ns();
  ProcSample after = sample_proc(o.pid);
  int n_ok = 0, n_failed = 0;
  int64_t n_events = 0, n_tokens = 0;
  for (Conn& c : conns) {
    if (c.fd >= 0) { close(c.fd); c.failed = true; }
    if (c.failed || !c.done) { ++n_failed; continue; }
    ++n_ok;
    n_events += c.n_events;
    n_tokens += c.n_tokens;
    ttft_ms.push_back((c.t_first - c.t_start) / 1e6);
    // Per-stream time per output token after the first: the last content event is the one before
    // the final usage / [DONE] frames, which arrive with it.
    if (c.n_tokens > 1) tpot_ms.push_back((c.t_last - c.t_first) / 1e6 / static_cast<double>(c.n_tokens - 1));
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  double wall_s = (t_end - t0) / 1e9;
  std::printf("{\"conns\": %d, \"ok\": %d, \"failed\": %d, \"wall_s\": %.3f, \"events\": %lld, "
              "\"events_per_s\": %.1f, \"completion_tokens\": %lld, \"tokens_per_s\": %.1f, "
              "\"ttft_ms_mean\": %.2f, \"ttft_ms_p50\": %.2f, \"ttft_ms_p99\": %.2f, \"tpot_ms_mean\": %.3f, "
              "\"tpot_ms_p50\": %.3f, \"gap_ms_p50\": %.3f, \"gap_ms_p99\": %.3f, "
              "\"delivery_ms_p50\": %.3f, \"delivery_ms_p99\": %.3f, \"server_cpu_s\": %.2f, "
              "\"server_peak_rss_mb\": %.1f, \"server_peak_threads\": %d}\n",
              o.n_conns, n_ok, n_failed, wall_s, static_cast<long long>(n_events), n_events / wall_s,
              static_cast<long long>(n_tokens), n_tokens / wall_s, mean(ttft_ms), percentile(ttft_ms, 0.5),
              percentile(ttft_ms, 0.99), mean(tpot_ms), percentile(tpot_ms, 0.5), percentile(gaps_ms, 0.5),
              percentile(gaps_ms, 0.99),
              percentile(delivery_ms, 0.5), percentile(delivery_ms, 0.99), after.cpu_s - before.cpu_s,
              peak.rss_kb / 1024.0, peak.threads);
  return n_failed == 0 ? 0 : 1;
}

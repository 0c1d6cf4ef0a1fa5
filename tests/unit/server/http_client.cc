// Raw-socket HTTP test client (see http_client.h).
#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace deepinfer::server::testing {

HttpClient::HttpClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
}

HttpClient::~HttpClient() { close(); }

void HttpClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpClient::send_raw(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

bool HttpClient::send_request(const std::string& method, const std::string& path, const std::string& body,
                              const std::vector<std::string>& extra_headers, bool keep_alive) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const std::string& h : extra_headers) r += h + "\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return send_raw(r + body);
}

bool HttpClient::fill(int timeout_ms) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  char buf[16384];
  ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n <= 0) return false;
  buffer_.append(buf, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> HttpClient::read_line(int timeout_ms) {
  for (;;) {
    size_t nl = buffer_.find("\r\n");
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 2);
      return line;
    }
    if (!fill(timeout_ms)) return std::nullopt;
  }
}

bool HttpClient::read_exact(size_t n, int timeout_ms, std::string* out) {
  while (buffer_.size() < n) {
    if (!fill(timeout_ms)) return false;
  }
  out->append(buffer_, 0, n);
  buffer_.erase(0, n);
  return true;
}

std::optional<ClientResponse> HttpClient::read_head(int timeout_ms) {
  ClientResponse r;
  auto status_line = read_line(timeout_ms);
  if (!status_line || status_line->size() < 12) return std::nullopt;
  r.status = std::atoi(status_line->c_str() + 9);
  for (;;) {
    auto line = read_line(timeout_ms);
    if (!line) return std::nullopt;
    if (line->empty()) break;
    size_t colon = line->find(':');
    if (colon == std::string::npos) continue;
    std::string name = line->substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line->substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    r.headers[name] = value;
  }
  return r;
}

std::optional<ClientResponse> HttpClient::read_streaming(const std::function<bool(const std::string&)>& on_data,
                                                         int timeout_ms) {
  auto r = read_head(timeout_ms);
  if (!r) return std::nullopt;
  if ((r->status >= 100 && r->status < 200) || r->status == 204) return r;  // interim / no content: no body
  if (r->headers.count("content-length")) {
    std::string body;
    if (!read_exact(std::stoul(r->headers["content-length"]), timeout_ms, &body)) return std::nullopt;
    r->body = body;
    on_data(body);
    return r;
  }
  if (r->headers["transfer-encoding"] != "chunked") return std::nullopt;
  for (;;) {
    auto size_line = read_line(timeout_ms);
    if (!size_line) return std::nullopt;
    size_t size = std::strtoul(size_line->c_str(), nullptr, 16);
    std::string data;
    if (!read_exact(size + 2, timeout_ms, &data)) return std::nullopt;
    if (size == 0) return r;
    data.resize(size);
    r->body += data;
    if (!on_data(data)) return r;
  }
}

std::optional<ClientResponse> HttpClient::read_response(int timeout_ms) {
  return read_streaming([](const std::string&) { return true; }, timeout_ms);
}

bool HttpClient::wait_closed(int timeout_ms) {
  for (;;) {
    if (fd_ < 0) return true;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

ClientResponse http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                            const std::vector<std::string>& extra_headers) {
  HttpClient c(port);
  if (!c.send_request(method, path, body, extra_headers, /*keep_alive=*/false)) return {};
  auto r = c.read_response();
  return r ? *r : ClientResponse{};
}

std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string frame = body.substr(pos, end - pos);
    pos = end + 2;
    SseEvent e;
    size_t line_start = 0;
    while (line_start <= frame.size()) {
      size_t nl = frame.find('\n', line_start);
      std::string line = frame.substr(line_start, nl == std::string::npos ? std::string::npos : nl - line_start);
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data += line.substr(6);
      if (nl == std::string::npos) break;
      line_start = nl + 1;
    }
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace deepinfer::server::testing

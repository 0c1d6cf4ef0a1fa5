// A small blocking HTTP/1.1 client on raw sockets for the server tests: it can send anything
// (malformed requests, invalid UTF-8, partial bodies), read chunked SSE streams piece by piece,
// and hang up in the middle of a stream, which a convenience library would hide.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::server::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

struct SseEvent {
  std::string event;  // "" when the frame has no event: line
  std::string data;
};

class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send_raw(std::string_view bytes);
  bool send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::vector<std::string>& extra_headers = {}, bool keep_alive = true);
  // Reads one whole response; nullopt on timeout or a closed connection.
  std::optional<ClientResponse> read_response(int timeout_ms = 10000);
  // Reads the status and headers, then body pieces (de-chunked) until `on_data` returns false or
  // the body ends. The response's body holds everything read.
  std::optional<ClientResponse> read_streaming(const std::function<bool(const std::string&)>& on_data,
                                               int timeout_ms = 10000);
  // True when the server closed the connection (EOF) within the timeout.
  bool wait_closed(int timeout_ms);
  void close();

 private:
  bool fill(int timeout_ms);  // reads more bytes into buffer_; false on EOF/timeout
  std::optional<std::string> read_line(int timeout_ms);
  bool read_exact(size_t n, int timeout_ms, std::string* out);
  std::optional<ClientResponse> read_head(int timeout_ms);

  int fd_ = -1;
  std::string buffer_;
};

// One request on a fresh connection (Connection: close).
ClientResponse http_request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                            const std::vector<std::string>& extra_headers = {});

std::vector<SseEvent> parse_sse(const std::string& body);

}  // namespace deepinfer::server::testing

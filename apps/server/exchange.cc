// Exchange: responses, request ids and the access log (see exchange.h).
#include "exchange.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <atomic>
#include <random>

#include "json_text.h"

namespace deepinfer::server {
namespace {

bool usable_client_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\') return false;
  }
  return true;
}

std::string make_request_id(const HttpRequest& request) {
  if (const std::string* h = request.header("x-request-id"); h != nullptr && usable_client_id(*h)) return *h;
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  uint64_t x = salt + 0x9E3779B97F4A7C15ull * (counter.fetch_add(1) + 1);
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  return fmt::format("req_{:016x}", x ^ (x >> 29));
}

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

}  // namespace

Exchange::Exchange(ServerContext& c, HttpRequest request, std::shared_ptr<Responder> responder,
                   std::string endpoint)
    : ctx(c),
      request_(std::move(request)),
      responder_(std::move(responder)),
      endpoint_(std::move(endpoint)),
      id_(make_request_id(request_)),
      format_(api_format_for_path(request_.path)),
      start_(std::chrono::steady_clock::now()) {}

Exchange::~Exchange() {
  // A stream that never ended: the client left (499, as nginx logs it) or the server aborted it.
  if (!logged_) complete(responder_->is_disconnected() ? 499 : (status_ != 0 ? status_ : 500));
}

std::string cors_allow_origin(const ServerOptions& options, const std::string* origin) {
  if (origin == nullptr) return {};
  for (const std::string& allowed : options.allowed_origins) {
    if (allowed == "*") return "*";
    if (allowed == *origin) return *origin;
  }
  return {};
}

void Exchange::add_cors_headers(HeaderList& headers) const {
  const std::string allow = cors_allow_origin(ctx.options, request_.header("origin"));
  if (allow.empty()) return;
  headers.emplace_back("access-control-allow-origin", allow);
  if (allow != "*") headers.emplace_back("vary", "Origin");
  headers.emplace_back("access-control-expose-headers", "x-request-id, retry-after");
}

void Exchange::reply(HttpResponse response) {
  response.headers.emplace_back("x-request-id", id_);
  add_cors_headers(response.headers);
  int status = response.status;
  responder_->send(std::move(response));
  complete(status);
}

void Exchange::reply_json(int status, const protocol::Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = json_text(body);
  reply(std::move(r));
}

void Exchange::reply_error(const ApiError& error) {
  annotate("error", error.message);
  reply(error_response(error, format_));
}

void Exchange::start_sse() {
  HttpResponse head;
  head.content_type = "text/event-stream; charset=utf-8";
  head.headers.emplace_back("x-request-id", id_);
  add_cors_headers(head.headers);
  {
    std::lock_guard lock(mu_);
    status_ = 200;
  }
  responder_->start_stream(std::move(head));
}

void Exchange::write(std::string frames) { responder_->write(std::move(frames)); }

void Exchange::end_stream() {
  responder_->end_stream();
  complete(200);
}

void Exchange::annotate(const std::string& key, const protocol::Json& value) {
  std::lock_guard lock(mu_);
  log_fields_[key] = value;
}

void Exchange::complete(int status) {
  protocol::Json line;
  {
    std::lock_guard lock(mu_);
    if (logged_) return;
    logged_ = true;
    status_ = status;
    if (!ctx.options.access_log) {
      ctx.metrics.on_http_response(endpoint_, status);
      return;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    line["time"] = utc_now();
    line["request_id"] = id_;
    line["method"] = request_.method;
    line["path"] = request_.path;
    line["status"] = status;
    line["duration_ms"] = std::round(ms * 10) / 10;
    line["remote"] = request_.remote;
    for (auto& [k, v] : log_fields_.items()) line[k] = v;
  }
  ctx.metrics.on_http_response(endpoint_, status);
  ctx.log_line(json_text(line));
}

}  // namespace deepinfer::server

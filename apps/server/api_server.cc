// ApiServer: routing, authentication and the shutdown sequence (see api_server.h).
#include "api_server.h"

#include <chrono>
#include <thread>

#include "api_error.h"
#include "exchange.h"
#include "generation.h"
#include "http/http_server.h"
#include "routes/routes.h"
#include "server_context.h"

namespace deepinfer::server {
namespace {

using RouteFn = void (*)(const std::shared_ptr<Exchange>&);

struct Route {
  const char* method;
  const char* path;  // exact, or a prefix when it ends with '/'
  bool needs_key;
  RouteFn fn;
};

constexpr Route kRoutes[] = {
    {"POST", "/v1/chat/completions", true, &handle_chat_completions},
    {"POST", "/v1/completions", true, &handle_completions},
    {"POST", "/v1/responses", true, &handle_responses},
    {"POST", "/v1/messages", true, &handle_messages},
    {"GET", "/v1/models", true, &handle_models},
    {"GET", "/v1/models/", true, &handle_models},
    {"POST", "/tokenize", true, &handle_tokenize},
    {"POST", "/detokenize", true, &handle_detokenize},
    {"GET", "/health", false, &handle_health},
    {"GET", "/metrics", false, &handle_metrics},
};

bool matches(const Route& r, const std::string& path) {
  std::string_view p(r.path);
  return p.back() == '/' ? path.size() > p.size() && path.rfind(p, 0) == 0 : path == p;
}

// Bearer token (OpenAI) or x-api-key (Anthropic), compared in constant time.
bool authorized(const HttpRequest& request, const std::string& key) {
  std::string given;
  if (const std::string* auth = request.header("authorization"); auth != nullptr && auth->rfind("Bearer ", 0) == 0) {
    given = auth->substr(7);
  } else if (const std::string* x = request.header("x-api-key"); x != nullptr) {
    given = *x;
  }
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

}  // namespace

ApiServer::ApiServer() = default;

ApiServer::~ApiServer() { shutdown(); }

Result<std::unique_ptr<ApiServer>> ApiServer::start(Engine& engine, ServerOptions options) {
  std::unique_ptr<ApiServer> server(new ApiServer());
  server->ctx_ = std::make_unique<ServerContext>(engine, std::move(options));
  if (!server->ctx_->tokenizer) return Status(StatusCode::kFailedPrecondition, "the engine has no tokenizer");
  ApiServer* self = server.get();
  auto http = HttpServer::start(
      server->ctx_->options.http,
      [self](HttpRequest request, std::shared_ptr<Responder> responder) {
        self->handle(std::move(request), std::move(responder));
      },
      [](int status, const std::string& message, const std::string& path) {
        return error_response(ApiError{status, message, "", status == 413 ? "request_too_large" : "", {}},
                              api_format_for_path(path));
      });
  if (!http.is_ok()) return http.status();
  server->http_ = std::move(http).value();
  HttpServer* h = server->http_.get();
  server->ctx_->post = [h](std::function<void()> fn) { h->post(std::move(fn)); };
  server->ctx_->n_connections = [h] { return h->n_connections(); };
  return server;
}

int ApiServer::port() const { return http_->port(); }

ServerContext& ApiServer::context() { return *ctx_; }

size_t ApiServer::n_connections() const { return http_ ? http_->n_connections() : 0; }

void ApiServer::handle(HttpRequest request, std::shared_ptr<Responder> responder) {
  const Route* route = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (!matches(r, request.path)) continue;
    path_known = true;
    if (request.method == r.method) route = &r;
  }
  std::string endpoint = route != nullptr ? route->path : (path_known ? request.path : "other");
  const bool preflight = route == nullptr && path_known && request.method == "OPTIONS" &&
                         !cors_allow_origin(ctx_->options, request.header("origin")).empty();
  auto exchange = std::make_shared<Exchange>(*ctx_, std::move(request), std::move(responder), endpoint);
  if (preflight) {
    // A browser's CORS preflight (no credentials are sent with it): the methods and the headers
    // it asked for are allowed; the real request is then authenticated as any other.
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.headers.emplace_back("access-control-allow-methods", "GET, POST, OPTIONS");
    const std::string* asked = exchange->request().header("access-control-request-headers");
    r.headers.emplace_back("access-control-allow-headers", asked != nullptr ? *asked : "*");
    r.headers.emplace_back("access-control-max-age", "600");
    return exchange->reply(std::move(r));
  }
  if (route == nullptr) {
    ApiError e{path_known ? 405 : 404,
               path_known ? "Method " + exchange->request().method + " is not allowed on " + exchange->request().path
                          : "Unknown path " + exchange->request().path,
               "", "", {}};
    return exchange->reply_error(e);
  }
  if (route->needs_key && !ctx_->options.api_key.empty() && !authorized(exchange->request(), ctx_->options.api_key)) {
    ctx_->metrics.on_rejected("unauthorized");
    return exchange->reply_error(ApiError{401, "Missing or invalid API key (Authorization: Bearer <key>).", "", "invalid_api_key", {}});
  }
  route->fn(exchange);
}

size_t ApiServer::shutdown() {
  if (shut_down_ || !http_) return n_aborted_;
  shut_down_ = true;
  using Clock = std::chrono::steady_clock;
  ctx_->admission.close();
  http_->stop_accepting();
  if (ctx_->options.access_log) ctx_->log_line(R"({"event":"shutdown","message":"draining in-flight requests"})");
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(ctx_->options.shutdown_timeout_s));
  if (!ctx_->admission.wait_idle(deadline)) {
    n_aborted_ = static_cast<size_t>(ctx_->admission.in_flight());
    ctx_->abort_all_generations();
    ctx_->admission.wait_idle(Clock::now() + std::chrono::seconds(5));
  }
  // Generations that ended early (stop string) may still be finishing their engine abort.
  for (auto until = Clock::now() + std::chrono::seconds(5); ctx_->n_generations() > 0 && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Responses are complete; give the sockets a moment to flush, then close what is left.
  for (auto until = Clock::now() + std::chrono::seconds(3); http_->n_connections() > 0 && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  http_->close_all();
  http_->stop();
  if (ctx_->options.access_log) ctx_->log_line(R"({"event":"shutdown","message":"stopped"})");
  return n_aborted_;
}

}  // namespace deepinfer::server

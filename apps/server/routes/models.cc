// GET /v1/models (and /v1/models/{id}) and GET /health.
#include <ctime>

#include "routes/routes.h"

namespace deepinfer::server {
namespace {

protocol::Json model_json(const ServerContext& ctx, const std::string& id) {
  static const int64_t kCreated = static_cast<int64_t>(std::time(nullptr));
  protocol::Json m;
  m["id"] = id;
  m["object"] = "model";
  m["created"] = kCreated;
  m["owned_by"] = "deepinfer";
  m["root"] = ctx.model_id();
  m["max_model_len"] = ctx.max_model_len;
  return m;
}

}  // namespace

void handle_models(const std::shared_ptr<Exchange>& exchange) {
  const ServerContext& ctx = exchange->ctx;
  const std::string& path = exchange->request().path;
  static const std::string kPrefix = "/v1/models/";
  if (path.rfind(kPrefix, 0) == 0) {
    std::string id = path.substr(kPrefix.size());
    if (!ctx.serves_model(id) || id.empty()) return exchange->reply_error(model_not_found(id));
    return exchange->reply_json(200, model_json(ctx, id));
  }
  protocol::Json data = protocol::Json::array();
  for (const std::string& name : ctx.options.served_model_names) data.push_back(model_json(ctx, name));
  exchange->reply_json(200, protocol::Json{{"object", "list"}, {"data", std::move(data)}});
}

void handle_health(const std::shared_ptr<Exchange>& exchange) {
  if (exchange->ctx.admission.closed()) {
    return exchange->reply_error(ApiError{503, "The server is shutting down.", "", "", {}});
  }
  exchange->reply_json(200, protocol::Json{{"status", "ok"}});
}

}  // namespace deepinfer::server

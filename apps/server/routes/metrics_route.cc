// GET /metrics: Prometheus text exposition format 0.0.4.
#include "routes/routes.h"

namespace deepinfer::server {

void handle_metrics(const std::shared_ptr<Exchange>& exchange) {
  ServerContext& ctx = exchange->ctx;
  ServerGauges gauges;
  gauges.n_in_flight = ctx.admission.in_flight();
  gauges.max_in_flight = ctx.admission.limit();
  gauges.shutting_down = ctx.admission.closed();
  gauges.n_connections = ctx.n_connections ? static_cast<int64_t>(ctx.n_connections()) : 0;
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx.metrics.render(ctx.engine.stats(), gauges);
  exchange->reply(std::move(r));
}

}  // namespace deepinfer::server

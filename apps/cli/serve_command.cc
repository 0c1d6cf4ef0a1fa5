// `deepinfer serve`: opens the engine and serves the OpenAI- and Anthropic-compatible HTTP API
// (apps/server, ApiServer) until SIGINT/SIGTERM, then drains in-flight requests and exits. The
// line "deepinfer serve: listening on http://HOST:PORT" on stdout tells scripts (and the SDK
// tests, which use --port 0) where it listens. Signals are blocked before any thread starts and
// taken by sigwait here, so no engine or io thread is ever interrupted by them.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "command.h"
#include "deepinfer/engine.h"
#include "engine_flags.h"

#if DI_HAVE_SERVER
#include "api_server.h"
#endif

namespace deepinfer::cli {
namespace {

#if DI_HAVE_SERVER

struct ServeArgs {
  std::shared_ptr<EngineFlags> engine;
  server::ServerOptions server;
  int64_t max_body_mb = 32;
  bool no_thinking = false;
  bool quiet = false;
};

void add_options(CLI::App* app, ServeArgs* a) {
  a->engine = add_engine_flags(app);  // the same engine flags as generate / chat
  app->add_option("--host", a->server.http.host, "address to listen on")->capture_default_str();
  app->add_option("--port", a->server.http.port, "port (0: any free port)")->capture_default_str();
  app->add_option("--api-key", a->server.api_key, "require 'Authorization: Bearer KEY' (or x-api-key)")
      ->envname("DEEPINFER_API_KEY");
  app->add_option("--served-model-name", a->server.served_model_names, "model ids to accept (default: the model directory name)");
  app->add_option("--max-in-flight", a->server.max_in_flight, "requests queued or running before 429 (0: 4096)")->capture_default_str();
  app->add_option("--max-body-mb", a->max_body_mb, "largest request body (413 beyond)")->capture_default_str();
  app->add_option("--io-threads", a->server.http.n_threads, "HTTP io threads (0: one per core, at least 2)")->capture_default_str();
  app->add_option("--shutdown-timeout", a->server.shutdown_timeout_s, "seconds in-flight requests get on shutdown")->capture_default_str();
  app->add_flag("--no-thinking", a->no_thinking, "requests that do not choose get thinking mode off");
  app->add_option("--allowed-origins", a->server.allowed_origins,
                  "browser origins allowed to call the API (CORS; '*' = any, the default; '' = none)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_flag("--quiet", a->quiet, "no access log");
}

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void serve(const ServeArgs& args) {
  sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before the engine and io threads exist
  std::unique_ptr<Engine> engine = open_engine_or_fail("serve", *args.engine);
  server::ServerOptions so = args.server;
  so.http.max_body_bytes = static_cast<size_t>(args.max_body_mb) << 20;
  so.thinking_by_default = !args.no_thinking;
  so.access_log = !args.quiet;
  auto server = server::ApiServer::start(*engine, so);
  if (!server.is_ok()) fail("serve", server.status().message(), 2);
  std::printf("deepinfer serve: listening on http://%s:%d (model %s)\n", so.http.host.c_str(), (*server)->port(),
              engine->model_dir().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  // A second signal while draining stops at once.
  std::thread([signals]() mutable {
    int again = 0;
    sigwait(&signals, &again);
    std::fprintf(stderr, "deepinfer serve: second signal, exiting without draining\n");
    std::_Exit(1);
  }).detach();
  std::fprintf(stderr, "deepinfer serve: %s, draining (up to %.0f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               so.shutdown_timeout_s);
  size_t n_aborted = (*server)->shutdown();
  engine->shutdown(/*drain=*/false);
  std::fprintf(stderr, "deepinfer serve: stopped (%zu requests aborted)\n", n_aborted);
}

void setup(CLI::App* app) {
  auto args = std::make_shared<ServeArgs>();
  add_options(app, args.get());
  app->callback([args] { serve(*args); });
}

#else

void setup(CLI::App* app) {
  app->callback([] { fail("serve", "this build has no HTTP server (it needs the Debian package libboost1.81-dev)", 2); });
}

#endif

DI_CLI_COMMAND("serve", "Serve the OpenAI- and Anthropic-compatible HTTP API", setup);

}  // namespace
}  // namespace deepinfer::cli

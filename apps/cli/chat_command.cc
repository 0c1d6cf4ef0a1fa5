// `deepinfer chat`: an interactive conversation through the encoding layer (chat.h). Each turn
// renders the history with render_ids (client text never yields a control token), streams the
// reply through the Engine, and parses it with OutputParser, showing reasoning apart from the
// answer. Commands: /think, /nothink, /reset, /exit (also EOF), /help. Works with stdin not a
// TTY (one user message per line, no prompt), which is how the tests drive it. Ctrl-C aborts the
// reply being generated.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <iostream>
#include <mutex>

#include "command.h"
#include "deepinfer/chat.h"
#include "engine_flags.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kName = "chat";

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct ChatArgs {
  bool thinking = false;
  std::string system;
};

// Events from the engine thread, consumed by the terminal thread.
struct EventQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenEvent> events;
  void push(const TokenEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
    cv.notify_one();
  }
  bool pop(TokenEvent* e, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, wait, [&] { return !events.empty(); })) return false;
    *e = std::move(events.front());
    events.pop_front();
    return true;
  }
};

class ChatSession {
 public:
  ChatSession(Engine& engine, const ChatArgs& args, SamplingParams sampling)
      : engine_(engine), sampling_(std::move(sampling)), tty_(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
    family_ = engine.model_family() == "deepseek_v41" ? chat::ModelFamily::kV41 : chat::ModelFamily::kV4;
    thinking_ = args.thinking;
    system_ = args.system;
    reset();
  }

  // Returns false when the session should end.
  bool handle_line(const std::string& line) {
    if (line == "/exit" || line == "/quit") return false;
    if (line == "/think" || line == "/nothink") {
      thinking_ = line == "/think";
      std::printf("[thinking mode %s]\n", thinking_ ? "on" : "off");
    } else if (line == "/reset") {
      reset();
      std::printf("[conversation cleared]\n");
    } else if (line == "/help") {
      std::printf("/think, /nothink: thinking mode on/off; /reset: clear history; /exit: quit\n");
    } else if (!line.empty()) {
      chat::Message user;
      user.role = chat::Role::kUser;
      user.content = line;
      messages_.push_back(std::move(user));
      reply();
    }
    std::fflush(stdout);
    return true;
  }

  void prompt() const {
    if (tty_) std::printf("%s> ", thinking_ ? "think" : "");
    std::fflush(stdout);
  }

 private:
  void reset() {
    messages_.clear();
    if (!system_.empty()) messages_.push_back(chat::Message{.role = chat::Role::kSystem, .content = system_});
  }

  void show(const chat::ChatEvent& ev) {
    if (ev.kind == chat::EventKind::kReasoningDelta) {
      if (!in_reasoning_) std::printf(tty_ ? "\x1b[2m[reasoning] " : "[reasoning] ");
      in_reasoning_ = true;
      std::fputs(ev.text.c_str(), stdout);
    } else if (ev.kind == chat::EventKind::kContentDelta || ev.kind == chat::EventKind::kToolCallStart) {
      if (in_reasoning_) std::printf(tty_ ? "\x1b[0m\n[answer] " : "\n[answer] ");
      in_reasoning_ = false;
      std::fputs(ev.kind == chat::EventKind::kContentDelta ? ev.text.c_str() : ("[tool call " + ev.tool_name + "]").c_str(),
                 stdout);
    } else if (ev.kind == chat::EventKind::kError) {
      std::printf("\n[malformed output: %s]", ev.text.c_str());
    }
    std::fflush(stdout);
  }

  void reply() {
    const chat::RenderOptions render{family_, thinking_ ? chat::ThinkingMode::kThinking : chat::ThinkingMode::kChat};
    auto ids = chat::render_ids(messages_, render, *engine_.tokenizer());
    if (!ids.is_ok()) {
      std::printf("[cannot render the conversation: %s]\n", ids.status().message().c_str());
      messages_.pop_back();
      return;
    }
    auto parser = chat::OutputParser::create(engine_.tokenizer(), chat::ParserOptions{family_, render.thinking_mode});
    if (!parser.is_ok()) fail(kName, parser.status().message(), 1);
    auto queue = std::make_shared<EventQueue>();
    Request req;
    req.prompt_ids = std::move(ids).value();
    req.sampling = sampling_;
    auto id = engine_.submit(std::move(req), [queue](const TokenEvent& e) { queue->push(e); });
    if (!id.is_ok()) {
      std::printf("[request rejected: %s]\n", id.status().message().c_str());
      messages_.pop_back();
      return;
    }
    in_reasoning_ = false;
    g_interrupted = false;
    std::vector<chat::ChatEvent> evs;
    for (TokenEvent e;;) {
      if (!queue->pop(&e, std::chrono::milliseconds(50))) {
        if (g_interrupted.exchange(false)) engine_.abort(*id);
        continue;
      }
      for (int32_t t : e.token_ids) parser->push(t, &evs);
      if (e.finish.has_value() && !parser->is_done()) {
        parser->finish(*e.finish == FinishReason::kLength ? chat::FinishReason::kLength : chat::FinishReason::kStop, &evs);
      }
      for (const chat::ChatEvent& ev : evs) show(ev);
      evs.clear();
      if (e.finish.has_value()) {
        if (tty_ && in_reasoning_) std::printf("\x1b[0m");
        std::printf("\n[%s, %d tokens]\n", finish_reason_name(*e.finish), e.n_generated_tokens);
        if (!e.error.empty()) std::printf("[error: %s]\n", e.error.c_str());
        break;
      }
    }
    messages_.push_back(parser->to_message());
  }

  Engine& engine_;
  SamplingParams sampling_;
  bool tty_;
  chat::ModelFamily family_;
  bool thinking_ = false;
  bool in_reasoning_ = false;
  std::string system_;
  std::vector<chat::Message> messages_;
};

void run(const ChatArgs& args, const EngineFlags& engine_flags, const SamplingFlags& sampling_flags) {
  std::unique_ptr<Engine> engine = open_engine_or_fail(kName, engine_flags);
  SamplingParams sampling = sampling_from_flags(sampling_flags);
  sampling.n = 1;
  ChatSession session(*engine, args, sampling);
  std::signal(SIGINT, on_sigint);
  if (isatty(STDIN_FILENO)) {
    std::printf("DeepInfer chat with %s (%s). /think /nothink /reset /exit\n", engine->model_dir().c_str(),
                engine->model_family().c_str());
  }
  std::string line;
  for (session.prompt(); std::getline(std::cin, line); session.prompt()) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!session.handle_line(line)) break;
  }
  std::signal(SIGINT, SIG_DFL);
  engine->shutdown(/*drain=*/false);
}

void setup(CLI::App* app) {
  auto args = std::make_shared<ChatArgs>();
  auto engine_flags = add_engine_flags(app);
  auto sampling_flags = add_sampling_flags(app, 512);
  app->add_flag("--thinking,!--no-thinking", args->thinking, "start in thinking mode (default: off)");
  app->add_option("--system", args->system, "system prompt");
  app->callback([args, engine_flags, sampling_flags] { run(*args, *engine_flags, *sampling_flags); });
}

}  // namespace

DI_CLI_COMMAND(kName, "Chat interactively (or line by line from stdin) through the chat encoding", setup);

}  // namespace deepinfer::cli

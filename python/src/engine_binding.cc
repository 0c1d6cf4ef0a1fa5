// deepinfer._core.Engine and deepinfer._core.Stream: thin wrappers over deepinfer::Engine. The
// GIL is released while the engine works (generate, waiting on a stream); the engine thread never
// touches Python objects — stream events cross through a C++ queue.
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include "convert.h"
#include "deepinfer/chat.h"

namespace deepinfer::python {
namespace {

// Events of one streamed request, filled on the engine thread.
struct StreamQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenEvent> events;
  int32_t n_open = 1;  // sequences without a final event
};

class PyStream {
 public:
  PyStream(std::shared_ptr<Engine> engine, RequestId id, std::shared_ptr<StreamQueue> q)
      : engine_(std::move(engine)), id_(id), q_(std::move(q)) {}
  // The next event dict, None at the end; raises TimeoutError after `timeout` seconds (< 0: wait).
  py::object next(double timeout) {
    TokenEvent e;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(q_->mu);
      auto ready = [&] { return !q_->events.empty() || q_->n_open == 0; };
      if (timeout < 0) {
        q_->cv.wait(lock, ready);
      } else if (!q_->cv.wait_for(lock, std::chrono::duration<double>(timeout), ready)) {
        lock.unlock();
        py::gil_scoped_acquire acquire;
        throw py::value_error("stream: no event within the timeout");
      }
      if (q_->events.empty()) return py::none();
      e = std::move(q_->events.front());
      q_->events.pop_front();
    }
    return event_to_dict(e);
  }
  void abort() { engine_->abort(id_); }
  RequestId id() const { return id_; }

 private:
  std::shared_ptr<Engine> engine_;
  RequestId id_;
  std::shared_ptr<StreamQueue> q_;
};

void draw_progress(size_t done, size_t total) {
  constexpr size_t kWidth = 30;
  const size_t filled = total == 0 ? kWidth : kWidth * done / total;
  std::fprintf(stderr, "\rProcessed prompts: [%s%s] %zu/%zu", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '-').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

class PyEngine {
 public:
  explicit PyEngine(const py::kwargs& kwargs) {
    const EngineOptions options = engine_options_from_kwargs(kwargs);
    std::unique_ptr<Engine> e;
    {
      py::gil_scoped_release release;
      auto opened = Engine::open(options);
      py::gil_scoped_acquire acquire;
      e = unwrap(std::move(opened));
    }
    engine_ = std::shared_ptr<Engine>(std::move(e));
  }

  py::list generate(const py::list& requests, bool progress) {
    std::vector<Request> reqs;
    for (py::handle r : requests) reqs.push_back(request_from_dict(py::reinterpret_borrow<py::dict>(r)));
    Result<std::vector<GenerateOutput>> outs = Status(StatusCode::kInternal, "not run");
    {
      py::gil_scoped_release release;
      outs = engine_->generate(std::move(reqs), progress ? std::function<void(size_t, size_t)>(draw_progress) : nullptr);
    }
    py::list result;
    for (const GenerateOutput& o : unwrap(std::move(outs))) result.append(output_to_dict(o));
    return result;
  }

  PyStream stream(const py::dict& request) {
    Request req = request_from_dict(request);
    auto q = std::make_shared<StreamQueue>();
    q->n_open = std::max(req.sampling.n, 1);
    const RequestId id = unwrap(engine_->submit(std::move(req), [q](const TokenEvent& e) {
      std::lock_guard<std::mutex> lock(q->mu);
      q->events.push_back(e);
      if (e.finish.has_value()) --q->n_open;
      q->cv.notify_all();
    }));
    return PyStream(engine_, id, q);
  }

  std::vector<int32_t> encode(const std::string& text, bool match_special) const {
    return engine_->tokenizer()->encode(text, match_special);
  }
  py::str decode(const std::vector<int32_t>& ids, bool skip_special) const {
    return py::bytes(engine_->tokenizer()->decode(ids, skip_special)).attr("decode")("utf-8", "replace");
  }

  chat::ModelFamily family() const {
    return engine_->model_family() == "deepseek_v41" ? chat::ModelFamily::kV41 : chat::ModelFamily::kV4;
  }

  // A conversation in parse_chat_json's format (docs/chat-encoding.md) → prompt token ids.
  std::vector<int32_t> render_chat(const std::string& conversation_json) const {
    chat::ChatInput input = unwrap(chat::parse_chat_json(conversation_json, family()));
    return unwrap(chat::render_ids(input.messages, input.options, *engine_->tokenizer()));
  }

  // Generated ids → {"reasoning_content", "content", "tool_calls", "error", "finish_reason"}.
  py::dict parse_chat_output(const std::vector<int32_t>& ids, bool thinking, const std::string& finish) const {
    auto parser = unwrap(chat::OutputParser::create(
        engine_->tokenizer(), chat::ParserOptions{family(), thinking ? chat::ThinkingMode::kThinking : chat::ThinkingMode::kChat}));
    std::vector<chat::ChatEvent> events;
    for (int32_t id : ids) parser.push(id, &events);
    if (!parser.is_done()) parser.finish(finish == "length" ? chat::FinishReason::kLength : chat::FinishReason::kStop, &events);
    const chat::ParsedOutput& out = parser.output();
    py::list calls;
    for (const chat::ToolCall& c : out.tool_calls) {
      py::dict d;
      d["id"] = c.id;
      d["name"] = c.name;
      d["arguments"] = c.arguments;
      calls.append(d);
    }
    py::dict d;
    d["reasoning_content"] = py::bytes(out.reasoning_content).attr("decode")("utf-8", "replace");
    d["content"] = py::bytes(out.content).attr("decode")("utf-8", "replace");
    d["tool_calls"] = calls;
    d["error"] = out.error;
    d["finish_reason"] = out.finish_reason ? chat::finish_reason_name(*out.finish_reason) : "stop";
    return d;
  }

  void abort(RequestId id) { engine_->abort(id); }
  py::dict stats() const { return stats_to_dict(engine_->stats()); }
  std::string model_dir() const { return engine_->model_dir(); }
  std::string model_family() const { return engine_->model_family(); }
  int32_t max_model_len() const { return engine_->max_model_len(); }
  int32_t eos_token_id() const { return engine_->tokenizer()->eos_id(); }
  int32_t bos_token_id() const { return engine_->tokenizer()->bos_id(); }
  void shutdown(bool drain) {
    py::gil_scoped_release release;
    engine_->shutdown(drain);
  }

 private:
  std::shared_ptr<Engine> engine_;
};

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<PyStream>(m, "Stream")
      .def("next", &PyStream::next, py::arg("timeout") = -1.0,
           "Next event dict (None after the last); raises ValueError on timeout")
      .def("abort", &PyStream::abort)
      .def_property_readonly("request_id", &PyStream::id);
  py::class_<PyEngine>(m, "Engine")
      .def(py::init<const py::kwargs&>())
      .def("generate", &PyEngine::generate, py::arg("requests"), py::arg("progress") = false)
      .def("stream", &PyEngine::stream, py::arg("request"))
      .def("encode", &PyEngine::encode, py::arg("text"), py::arg("match_special") = true)
      .def("decode", &PyEngine::decode, py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def("render_chat", &PyEngine::render_chat, py::arg("conversation_json"))
      .def("parse_chat_output", &PyEngine::parse_chat_output, py::arg("token_ids"), py::arg("thinking"),
           py::arg("finish_reason") = "stop")
      .def("abort", &PyEngine::abort)
      .def("stats", &PyEngine::stats)
      .def("shutdown", &PyEngine::shutdown, py::arg("drain") = true)
      .def_property_readonly("model_dir", &PyEngine::model_dir)
      .def_property_readonly("model_family", &PyEngine::model_family)
      .def_property_readonly("max_model_len", &PyEngine::max_model_len)
      .def_property_readonly("eos_token_id", &PyEngine::eos_token_id)
      .def_property_readonly("bos_token_id", &PyEngine::bos_token_id);
}

}  // namespace deepinfer::python

// `deepinfer`: the command-line front end. Subcommands register themselves (command.h).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "command.h"

namespace deepinfer::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> registry;
  return registry;
}

void fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "deepinfer %s: %s\n", command.c_str(), message.c_str());
  throw CLI::RuntimeError(code);
}

std::string command_line(const std::string& command, const CLI::App& app) {
  std::string line = "deepinfer " + command;
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || o->get_name() == "--help") continue;
    for (const std::string& v : o->results()) line += " " + o->get_name() + " " + v;
  }
  return line;
}

void write_output(const std::string& command, const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::printf("%s\n", text.c_str());
    return;
  }
  std::ofstream f(path);
  f << text << "\n";
  if (!f) fail(command, "cannot write " + path, 1);
}

}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  CLI::App app{"DeepInfer: inference engine for DeepSeek-V4-Flash and V4.1-Flash"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepinfer 0.1.0");
  auto& registry = deepinfer::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& cmd : registry) cmd.setup(app.add_subcommand(cmd.name, cmd.help));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

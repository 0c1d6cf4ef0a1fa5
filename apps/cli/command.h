// Subcommand registry of the `deepinfer` CLI. Each command lives in its own file and registers
// itself with DI_CLI_COMMAND; main.cc only builds the CLI11 app from the registry. Commands use
// the public API (include/deepinfer) only. A command reports failure by throwing
// CLI::RuntimeError(exit_code) after printing a message that names the problem.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct Command {
  std::string name;
  std::string help;
  // Adds options and the callback to the subcommand that main.cc created.
  std::function<void(CLI::App*)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string help, std::function<void(CLI::App*)> setup) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

// Prints "deepinfer <command>: <message>" to stderr and exits the command with `code`.
[[noreturn]] void fail(const std::string& command, const std::string& message, int code = 1);
// "deepinfer <command> --opt value ..." of the options given (recorded in benchmark JSON).
std::string command_line(const std::string& command, const CLI::App& app);
// `text` to stdout (empty path) or into the file at `path` (failing the command if it cannot).
void write_output(const std::string& command, const std::string& text, const std::string& path);

}  // namespace deepinfer::cli

#define DI_CLI_CONCAT_INNER(a, b) a##b
#define DI_CLI_CONCAT(a, b) DI_CLI_CONCAT_INNER(a, b)
#define DI_CLI_COMMAND(name, help, setup_fn) \
  static ::deepinfer::cli::CommandRegistrar DI_CLI_CONCAT(di_cli_registrar_, __LINE__)(name, help, setup_fn)

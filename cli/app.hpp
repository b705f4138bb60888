#pragma once
// The command line: one file per subcommand, each registering itself on the app.
// Verbs parse arguments and call the libraries; logic that a test must reach lives there.
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch::cli {

inline constexpr const char* kVersion = "0.1.0";

// Exit codes of DESIGN.md §7.
enum Exit : int { kOk = 0, kFailure = 1, kUsage = 2, kInterrupted = 130 };

// A command line that asks for something impossible (a bad option value, options that
// exclude each other, a missing choice): exit 2, like a parse error. Errors in what the
// options point at (a file, a database, a script) stay InputErrors: exit 1.
class UsageError : public InputError {
 public:
  using InputError::InputError;
};

// A verb's body; returns the exit code. Exceptions are turned into codes by run().
using Action = std::function<int()>;

// Options shared by the verbs that measure or decide.
struct CommonOptions {
  std::string device = "auto";
  std::string db = "evodispatch.db";
  bool json = false;
};
void add_device_option(CLI::App& verb, CommonOptions& o);
void add_db_option(CLI::App& verb, CommonOptions& o);
void add_json_option(CLI::App& verb, CommonOptions& o);
// `--config-reference`: prints the search config's fields as a markdown table (the one in
// README.md) and exits 0, like --help, before anything else is read or opened.
void add_config_reference_flag(CLI::App& verb);

// Writes `text` next to `path` and renames it into place, so an interrupted or failed
// write leaves the old file or none, never half of one. InputError naming the file.
void write_atomically(const std::string& path, const std::string& text);

// Each verb adds its subcommand and sets `action` to run when it is chosen.
void add_env(CLI::App& app, Action& action);
void add_check(CLI::App& app, Action& action);
void add_decide(CLI::App& app, Action& action);
void add_bench(CLI::App& app, Action& action);
void add_sweep(CLI::App& app, Action& action);
void add_calibrate(CLI::App& app, Action& action);
void add_search(CLI::App& app, Action& action);
void add_worker(CLI::App& app, Action& action);
void add_distill(CLI::App& app, Action& action);
void add_regress(CLI::App& app, Action& action);
void add_results(CLI::App& app, Action& action);

int run(int argc, char** argv);

}  // namespace evodispatch::cli

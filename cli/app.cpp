#include "app.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <evodispatch/heuristics/contract.hpp>
#include <evodispatch/search/config.hpp>

#include "interrupt.hpp"

namespace evodispatch::cli {

void add_device_option(CLI::App& verb, CommonOptions& o) {
  verb.add_option("--device", o.device,
                  "auto | cuda:N | fa3:cuda:N (FlashAttention-3's kernels) | sim:PROFILE (a shipped profile or a "
                  "JSON file) | replay:DB (the GPU measurements stored in another results database)")
      ->capture_default_str();
}
void add_db_option(CLI::App& verb, CommonOptions& o) {
  verb.add_option("--db", o.db, "results database (SQLite)")->capture_default_str();
}
void add_json_option(CLI::App& verb, CommonOptions& o) {
  verb.add_flag("--json", o.json, "machine-readable output (JSON Lines or one JSON document)");
}
void add_config_reference_flag(CLI::App& verb) {
  verb.add_flag_callback(
      "--config-reference",
      [] {
        std::cout << search::search_config_reference();
        throw CLI::Success();
      },
      "print every config field (JSON path, default, allowed values, meaning) as a markdown table and exit");
}

int run(int argc, char** argv) {
  CLI::App app{"evodispatch: evolve GPU decode-attention dispatch heuristics"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("evodispatch ") + kVersion);
  Action action;
  add_env(app, action);
  add_check(app, action);
  add_decide(app, action);
  add_bench(app, action);
  add_sweep(app, action);
  add_calibrate(app, action);
  add_search(app, action);
  add_distill(app, action);
  add_regress(app, action);
  add_results(app, action);
  add_worker(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  install_interrupt_handler();
  try {
    return action();
  } catch (const UsageError& e) {
    std::cerr << "evodispatch: " << e.what() << "\n";
    return kUsage;
  } catch (const InputError& e) {
    std::cerr << "evodispatch: " << e.what() << "\n";
    return kFailure;
  } catch (const Interrupted&) {
    std::cerr << "evodispatch: interrupted; everything measured so far is stored\n";
    return kInterrupted;
  } catch (const std::exception& e) {
    std::cerr << "evodispatch: error: " << e.what() << "\n";
    return kFailure;
  }
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError("cannot write " + tmp);
    f << text;
    if (!f.flush()) throw InputError("writing " + tmp + " failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw InputError("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace evodispatch::cli

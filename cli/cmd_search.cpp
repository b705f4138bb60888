// evodispatch search: run or resume an evolutionary search from a JSON config.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <evodispatch/search/replay_evaluator.hpp>
#include <evodispatch/evaluator/evaluator.hpp>
#include <evodispatch/evaluator/gpu_probe.hpp>
#include <evodispatch/results/database.hpp>
#include <evodispatch/results/runs.hpp>
#include <evodispatch/search/config.hpp>
#include <evodispatch/search/engine.hpp>

#include "app.hpp"
#include "interrupt.hpp"

namespace evodispatch::cli {

namespace {

struct SearchOptions : CommonOptions {
  std::string config = "quickstart";
  std::string resume;
  CLI::Option* resume_opt = nullptr;
  CLI::Option* config_opt = nullptr;
  CLI::Option* device_opt = nullptr;
  std::optional<std::uint64_t> seed;
  std::optional<std::int64_t> max_evaluations;
  std::optional<double> minutes;
};

// "sim:a,sim:b", "cuda:all", "cuda:0,cuda:1": one evaluator (worker) per entry.
std::vector<std::string> device_list(const std::string& spec) {
  std::vector<std::string> out;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw UsageError("--device \"" + spec + "\": an empty entry in the list");
    if (item == "cuda:all") {
      std::string why;
      const auto gpus = probe_gpus(&why);
      if (gpus.empty()) throw InputError("--device cuda:all: this machine has no GPU (" + why + ")");
      for (const auto& g : gpus) out.push_back("cuda:" + std::to_string(g.index));
      continue;
    }
    out.push_back(item);
  }
  if (out.empty()) throw UsageError("--device: empty");
  return out;
}

std::string fixed(double v, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

std::string clock_text(double seconds) {
  const int s = static_cast<int>(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", s / 60, s % 60);
  return buf;
}

// The one-line display on a terminal (rewritten in place), plain lines otherwise (at
// most one every 10 s, so logs stay readable).
class SearchProgress {
 public:
  SearchProgress() : tty_(isatty(STDERR_FILENO) != 0) {}
  ~SearchProgress() { end_line(); }

  void update(const search::SearchStatus& s) {
    const auto now = std::chrono::steady_clock::now();
    const bool final = s.phase == "done";
    // A new phase or setup task always shows (a log must say when setup ended); counts
    // within one are rate-limited.
    const bool news = s.phase != last_phase_ || s.message != last_message_;
    if (!final && !news && now - last_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10'000)))
      return;
    last_ = now;
    last_phase_ = s.phase;
    last_message_ = s.message;
    std::string line = "search run " + std::to_string(s.run_id) + " " + s.phase;
    if (s.phase == "setup") {
      line += ": " + s.message;
      if (s.total) line += " " + std::to_string(s.done) + "/" + std::to_string(s.total);
    } else if (s.phase == "search" || final) {
      line += " | step " + std::to_string(s.step) + " | " + std::to_string(s.evaluations);
      if (s.max_evaluations) line += "/" + std::to_string(s.max_evaluations);
      line += " programs";
      if (s.best_fitness) {
        line += " | best " + fixed(*s.best_fitness, 4) + "x";
        if (s.best_oracle_fraction) line += " (" + fixed(100 * *s.best_oracle_fraction, 1) + "% of oracle)";
      }
      line += " | " + std::to_string(s.duplicates) + " dup, " + std::to_string(s.failures) + " failed";
    } else {
      if (!s.message.empty()) line += " " + s.message;
      line += " " + std::to_string(s.done + 1) + "/" + std::to_string(s.total);
    }
    line += " | " + clock_text(s.elapsed_s);
    if (s.minutes > 0) line += "/" + clock_text(s.minutes * 60);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      drew_ = true;
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }

  void end_line() {
    if (tty_ && drew_) std::fputc('\n', stderr);
    drew_ = false;
  }

 private:
  bool tty_;
  bool drew_ = false;
  std::chrono::steady_clock::time_point last_{};
  std::string last_phase_, last_message_;
};

std::string shape_text(const nlohmann::json& j) {
  if (!j.is_object()) return "-";
  try {
    return describe(shape_from_json(j));
  } catch (const InputError&) {
    return j.dump();
  }
}

void print_split(const char* label, const nlohmann::json& f, const nlohmann::json& oracle_geomean) {
  std::cout << "    " << label << std::setw(12 - static_cast<int>(std::string(label).size())) << ""
            << "geomean " << fixed(f.value("geomean", 0.0), 4) << "x, worst " << fixed(f.value("worst", 0.0), 3)
            << "x (" << shape_text(f.value("worst_shape", nlohmann::json())) << ")";
  if (f.contains("oracle_fraction") && f["oracle_fraction"].is_number()) {
    std::cout << ", " << fixed(100 * f["oracle_fraction"].get<double>(), 1) << "% of the oracle's gain";
    if (oracle_geomean.is_number())
      std::cout << " (oracle " << fixed(oracle_geomean.get<double>(), 4) << "x; "
                << fixed(100 * f.value("geomean", 0.0) / oracle_geomean.get<double>(), 1) << "% of its speedup)";
  }
  std::cout << " on " << f.value("shapes", 0) << " shapes\n";
}

std::string time_split(const nlohmann::json& s);

// The test split: fresh shapes that selected nothing, the winner (or the baseline kept)
// measured on them.
void print_test(const nlohmann::json& t, bool no_winner, bool replayed) {
  if (!t.is_object()) return;
  if (t.contains("error") && !t.contains("geomean")) {
    std::cout << "    test        " << t["error"].get<std::string>() << "\n";
    return;
  }
  print_split(no_winner ? "test (base)" : "test", t, t.value("oracle_geomean", nlohmann::json()));
  int confirmed = 0;
  for (const auto& u : t["under_floor"]) confirmed += u.value("confirmed_under_floor", false) ? 1 : 0;
  std::cout << "                fresh shapes of " << t.value("workload", std::string()) << ": "
            << t.value("below_floor", 0) << " under the floor, " << confirmed << " confirmed when re-measured\n";
  const auto& c = t.value("confirmed", nlohmann::json());
  if (!c.is_object()) return;
  std::cout << "    re-measured geomean " << fixed(c.value("geomean", 0.0), 4) << "x, worst " << fixed(c.value("worst", 0.0), 3)
            << "x";
  if (c["oracle_fraction"].is_number())
    std::cout << ", " << fixed(100 * c["oracle_fraction"].get<double>(), 1) << "% of the oracle's gain (oracle "
              << fixed(c["oracle_geomean"].get<double>(), 4) << "x)";
  // A replay re-measures nothing: its comparisons divide the stored medians.
  std::cout << ": winner and oracle against the baseline, "
            << (replayed ? "stored medians divided (replayed)" : "interleaved") << ", on " << c.value("shapes", 0)
            << " shapes\n";
}

// Each program family's best finalist on validation and, when there is a test split, on test.
void print_families(const nlohmann::json& f) {
  if (!f.is_object()) return;
  std::cout << "  families (the winner's: " << (f["winner"].is_string() ? f["winner"].get<std::string>() : "none") << ")\n";
  for (const char* name : {"rules", "model"}) {
    const auto& x = f[name];
    std::cout << "    " << name << std::setw(12 - static_cast<int>(std::string(name).size())) << "";
    if (!x.is_object()) {
      std::cout << "no usable finalist\n";
      continue;
    }
    std::cout << "#" << x["program_id"] << ": validation " << fixed(x["validation"].value("geomean", 0.0), 4) << "x";
    const auto& t = x["test"];
    if (t.is_object() && t.contains("geomean"))
      std::cout << ", test " << fixed(t.value("geomean", 0.0), 4) << "x, worst " << fixed(t.value("worst", 0.0), 3)
                << "x, " << t.value("below_floor", 0) << " under the floor";
    std::cout << "\n";
  }
}

void print_summary(const nlohmann::json& s, const std::string& program_file) {
  const auto& oracle = s["oracle"];
  std::cout << "search run " << s["run_id"] << " on " << s.value("device", std::string()) << " ("
            << s.value("workers", 1) << " worker" << (s.value("workers", 1) == 1 ? "" : "s") << "), workload "
            << s.value("workload", std::string()) << " (" << s["shapes"]["train"] << " training, "
            << s["shapes"]["validation"] << " validation"
            << (s["shapes"].value("test", 0) ? ", " + std::to_string(s["shapes"]["test"].get<int>()) + " test" : "")
            << " shapes), baseline " << s.value("baseline", std::string()) << "\n";
  std::cout << "  stopped by " << s.value("stop_reason", std::string()) << " after " << s["evaluations"]
            << " programs in " << s["steps"] << " steps (" << time_split(s) << "); " << s["duplicates"]
            << " duplicates skipped, " << s["failures"] << " failed, " << s["measurements_taken"]
            << " measurements taken\n";
  const auto& w = s["winner"];
  if (w.is_null()) {
    std::cout << "  no program kept every shape above the floor on validation and in confirmation: keep the "
                 "baseline\n";
  } else {
    std::cout << "  best program #" << w["program_id"] << " (" << w.value("origin", std::string()) << ", generation "
              << w["generation"] << ", " << w["rules"] << " rule(s) in front of " << w.value("base", std::string())
              << "), hash " << w.value("hash", std::string()) << "\n";
    std::cout << "  speedup over " << s.value("baseline", std::string()) << ":\n";
    print_split("training", w["train"], oracle["train_geomean"]);
    if (w.contains("validation")) print_split("validation", w["validation"], oracle["validation_geomean"]);
    if (w.contains("confirmed")) {
      const auto& c = w["confirmed"];
      std::cout << "    confirmed   geomean " << fixed(c.value("geomean", 0.0), 4) << "x, worst "
                << fixed(c.value("worst", 0.0), 3) << "x on validation, re-measured on " << c["shapes_compared"]
                << " shapes where it differs from the baseline\n";
    }
  }
  print_test(s.value("test", nlohmann::json()), w.is_null(),
             s.value("device", std::string()).starts_with(search::kReplayPrefix));
  print_families(s.value("families", nlohmann::json()));
  std::cout << "  database: " << s.value("database", std::string()) << " (run " << s["run_id"] << ")\n";
  if (w.is_null()) return;
  if (!program_file.empty()) std::cout << "  full program (rules and base): " << program_file << "\n";
  if (w.contains("rules_lua"))
    std::cout << "\n-- the rules of program #" << w["program_id"] << " in front of " << w.value("base", std::string())
              << "\n" << w["rules_lua"].get<std::string>();
}

// Setup (store reads, the baseline, the oracle) apart from the search's own time, which
// is what stop.minutes limits. Summaries stored before the split carry elapsed_s alone.
std::string time_split(const nlohmann::json& s) {
  if (!s.contains("search_s")) return clock_text(s.value("elapsed_s", 0.0));
  return "setup " + clock_text(s.value("setup_s", 0.0)) + ", search " + clock_text(s.value("search_s", 0.0));
}

// The winner's full program, beside the database: DB minus ".db", "-run<N>-winner.lua".
// Written whole or not at all. Empty when there is no winner or no file database.
std::string write_program_file(const nlohmann::json& s, const std::string& db) {
  const auto& w = s["winner"];
  if (w.is_null() || !w.contains("source") || db.empty() || db == ":memory:") return "";
  std::filesystem::path path(db);
  if (path.extension() == ".db") path.replace_extension();
  path += "-run" + std::to_string(s["run_id"].get<std::int64_t>()) + "-winner.lua";
  write_atomically(path.string(), w["source"].get<std::string>());
  return path.string();
}

void report(const nlohmann::json& summary, const SearchOptions& o) {
  const std::string program_file = write_program_file(summary, o.db);
  if (o.json) {
    nlohmann::json out = summary;
    if (!program_file.empty()) out["program_file"] = program_file;
    std::cout << out.dump() << "\n";
  } else {
    print_summary(summary, program_file);
  }
}

int run_search(SearchOptions& o) {
  const bool resuming = o.resume_opt && o.resume_opt->count() > 0;
  if (resuming && o.config_opt->count() > 0)
    throw UsageError("--resume continues a run with its stored config; do not give --config too");
  if (resuming && (o.seed || o.max_evaluations || o.minutes))
    throw UsageError("--resume continues a run as configured; --seed, --max-evaluations and --minutes apply to new runs");

  auto db = results::Database::open(o.db);
  std::optional<std::int64_t> run_id;
  if (resuming) {
    if (o.resume.empty()) {
      run_id = search::SearchEngine::run_to_resume(db);
      if (!run_id) throw InputError("--resume: " + o.db + " has no search run to resume");
    } else {
      try {
        run_id = std::stoll(o.resume);
      } catch (const std::exception&) {
        throw UsageError("--resume: expected a run id, got \"" + o.resume + "\"");
      }
    }
    // A scheduler restarting a job script after its search ended: report the run, exit 0.
    if (const auto finished = search::SearchEngine::finished_summary(db, *run_id)) {
      std::cerr << "evodispatch: search run " << *run_id << " has finished; nothing to resume\n";
      report(*finished, o);
      return kOk;
    }
  }

  // On resume without --device, the device list the run was started with.
  std::string device = o.device;
  if (resuming && o.device_opt->count() == 0) {
    const auto run = results::Runs(db).get(*run_id);
    if (run && run->config.contains("device") && run->config["device"].is_string())
      device = run->config["device"].get<std::string>();
  }
  std::vector<std::unique_ptr<Evaluator>> owned;
  std::vector<Evaluator*> evaluators;
  for (const auto& spec : device_list(device)) {
    owned.push_back(search::make_any_evaluator(spec));
    evaluators.push_back(owned.back().get());
  }

  SearchProgress progress;
  search::EngineOptions opts;
  opts.evaluators = evaluators;
  opts.device_spec = device;
  opts.stop = interrupt_requested;
  opts.progress = [&](const search::SearchStatus& s) { progress.update(s); };

  nlohmann::json summary;
  try {
    std::unique_ptr<search::SearchEngine> engine;
    if (resuming) {
      engine = search::SearchEngine::resume(db, *run_id, opts);
    } else {
      search::SearchConfig config = search::load_search_config(o.config);
      if (o.max_evaluations) config.stop.max_evaluations = *o.max_evaluations;
      if (o.minutes) config.stop.minutes = *o.minutes;
      engine = search::SearchEngine::start(db, config, opts, o.seed);
    }
    summary = engine->run();
  } catch (const search::SearchInterrupted& e) {
    progress.end_line();
    std::cerr << "evodispatch: search run " << e.run_id << " interrupted; resume it with: evodispatch search --resume "
              << e.run_id << " --db " << o.db << "\n";
    throw Interrupted();
  }
  progress.end_line();
  report(summary, o);
  return kOk;
}

}  // namespace

void add_search(CLI::App& app, Action& action) {
  auto* verb = app.add_subcommand("search", "run or resume an evolutionary search for a dispatch heuristic");
  auto o = std::make_shared<SearchOptions>();
  o->config_opt = verb->add_option("--config", o->config,
                                   "a shipped config (" + [] {
                                     std::string names;
                                     for (const auto& n : search::search_config_names())
                                       names += (names.empty() ? "" : ", ") + n;
                                     return names;
                                   }() + ") or a JSON file")
                      ->capture_default_str();
  o->resume_opt = verb->add_option("--resume", o->resume,
                                   "continue run RUN_ID (default: the newest running or interrupted search)")
                      ->expected(0, 1);
  verb->add_option("--seed", o->seed, "random seed (overrides the config's)");
  verb->add_option("--max-evaluations", o->max_evaluations, "stop after this many programs (overrides the config)");
  verb->add_option("--minutes", o->minutes,
                   "stop after this much search time, setup not counted (overrides the config's stop.minutes)");
  o->device_opt = verb->add_option("--device", o->device,
                   "auto | cuda:N | cuda:all | sim:PROFILE, or a comma-separated list: one worker per entry")
      ->capture_default_str();
  add_db_option(*verb, *o);
  add_json_option(*verb, *o);
  add_config_reference_flag(*verb);
  verb->callback([&action, o] { action = [o] { return run_search(*o); }; });
}

}  // namespace evodispatch::cli
